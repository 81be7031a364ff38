import FixtureCorpus

/// The provider's published messages (`../Fixtures`), for every suite that needs one.
public enum TrustPaymentsCorpus {
    public static let all: FixtureCorpus = {
        do { return try FixtureCorpus(besideTestingFile: #filePath) } catch { fatalError("\(error)") }
    }()
}
