import PaypipeCore

/// The `appleReceipt` order's params, validated: what the receipt POST carries
/// and what every getAccessStatus poll needs.
///
/// `receiptData` is card-adjacent customer data and `customerToken` is a bearer credential of the
/// customer's Cleeng account, so neither appears in `description`, in a mirror or in any error.
public struct CleengReceipt: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    public let customerToken: String
    public let offerId: String
    /// Base64 App Store receipt, exactly as the app sent it.
    public let receiptData: String
    public let transactionId: String
    /// The customer's IP (IPv4 or IPv6 literal), passed on to getAccessStatus when given.
    public let ipAddress: String?

    /// Limits chosen to stay well inside the 64 KiB order frame while admitting JWT-style customer
    /// tokens and every App Store receipt an app sends.
    public enum Limits {
        public static let customerTokenMaxLength = 4096
        public static let offerIdMaxLength = 64
        public static let transactionIdMaxLength = 64
        public static let receiptDataMaxLength = 60_000
    }

    public static let knownParams: Set<String> = ["customerToken", "offerId", "receiptData", "transactionId", "ipAddress"]

    public init(customerToken: String, offerId: String, receiptData: String, transactionId: String, ipAddress: String? = nil) {
        self.customerToken = customerToken
        self.offerId = offerId
        self.receiptData = receiptData
        self.transactionId = transactionId
        self.ipAddress = ipAddress
    }

    /// Reads and validates the params of a cleeng `appleReceipt` order.
    public init(order: Order) throws(Rejection) {
        guard order.operation == .appleReceipt else {
            throw Rejection(
                .unknownOperation, field: "operation",
                "operation \(order.operation.rawValue) is not handled by the Cleeng receipt signer (expected appleReceipt)")
        }
        try self.init(params: ParamReader(order.params, allowed: CleengReceipt.knownParams, operation: "cleeng appleReceipt"))
    }

    /// The field rules alone, shared with the sandbox's reading of a receipt body (where other
    /// keys are tolerated, as Cleeng's endpoint does).
    package init(fields: [String: JSONValue]) throws(Rejection) {
        try self.init(params: ParamReader(fields, allowed: fields.keys, operation: "cleeng appleReceipt"))
    }

    private init(params: ParamReader) throws(Rejection) {
        customerToken = try params.cleengToken("customerToken", maxLength: Limits.customerTokenMaxLength)
        offerId = try params.cleengIdentifier("offerId", maxLength: Limits.offerIdMaxLength)
        receiptData = try params.cleengBase64("receiptData", maxLength: Limits.receiptDataMaxLength)
        transactionId = try params.cleengIdentifier("transactionId", maxLength: Limits.transactionIdMaxLength)
        ipAddress = try params.cleengOptionalIPAddress("ipAddress")
    }

    public var description: String {
        "CleengReceipt(offerId: \(offerId), transactionId: \(transactionId), customerToken: <redacted>, receiptData: <\(receiptData.utf8.count) bytes redacted>\(ipAddress.map { ", ipAddress: \($0)" } ?? ""))"
    }

    public var customMirror: Mirror {
        Mirror(self, children: ["offerId": offerId, "transactionId": transactionId], displayStyle: .struct)
    }
}
