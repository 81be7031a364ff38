import PaypipeCore

/// One merchant's PhonePe settings, checked once when the connector is built. Each order then
/// costs one lookup: copying the merchant's config and checking its URLs and ids on every
/// order would add to every signature. A bad setting still
/// rejects each order that needs it, with the same rejection naming the setting.
public struct PhonePeMerchant: Sendable {
    public let config: PhonePeConfig
    public let checksum: PhonePeChecksum
    /// The base URL without trailing slashes, and the merchantId; or why they cannot be used.
    let endpoint: Result<(baseURL: String, merchantId: String), Rejection>
    /// `phonepe.callbackScheme`, for orders that name none; or why it cannot be used.
    let configuredCallBackScheme: Result<String, Rejection>

    public init(config: PhonePeConfig) {
        self.config = config
        checksum = PhonePeChecksum(config: config)
        endpoint = Result { () throws(Rejection) in try config.validated() }
        configuredCallBackScheme = Result { () throws(Rejection) in try PhonePeAuthInit.configuredCallBackScheme(config) }
    }
}
