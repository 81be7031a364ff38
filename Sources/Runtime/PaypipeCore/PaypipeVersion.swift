/// This release of paypipe: `--version` of every executable, `paypipe_build_info`, and the
/// User-Agent nothing sends yet. Raised with each landed issue that changes the contract or the
/// store's schema.
public enum PaypipeVersion {
    public static let current = "0.46.0"
}
