import PaypipeCore
import Sandbox
import Viva

/// What the provider sandbox needs to stand in for the Viva app: read a sale URL as the app would
/// and answer with the callback URI the app would open. Deterministic: identifiers derive from the
/// clientTransactionId, so replays give identical callbacks.
public enum VivaSandbox {
    /// Reads and checks a sale request URL (see `VivaSale.init(requestURL:)`).
    public static func readSale(_ url: String) throws(CallbackRejection) -> VivaSale { try VivaSale(requestURL: url) }

    /// An approved result for `sale`, shaped like the approved response of Viva's inter-app
    /// documentation.
    public static func approved(
        _ sale: VivaSale, transactionDate: String = "2019-09-13T12:14:19.8703452+03:00",
        cardType: String = "Debit Mastercard", accountNumber: String = "537489******1831"
    ) -> VivaSaleCallback {
        let digest = Array(Digest.sha256Hex(sale.clientTransactionId).utf8)
        let digits = digest.map { String(Int($0) % 10) }.joined()
        return VivaSaleCallback(
            callback: sale.callback, status: .success, message: "Transaction successful",
            clientTransactionId: sale.clientTransactionId, amount: sale.amount, tipAmount: sale.tipAmount ?? 0,
            verificationMethod: "CONTACTLESS", rrn: String(digits.prefix(12)), cardType: cardType, accountNumber: accountNumber,
            referenceNumber: String(digits.dropFirst(6).prefix(6)), authorisationCode: String(digits.dropFirst(12).prefix(6)),
            tid: "16016684", orderCode: "1" + String(digits.dropFirst(18).prefix(15)),
            shortOrderCode: "1" + String(digits.dropFirst(18).prefix(9)),
            installments: sale.preferredInstallments, transactionDate: transactionDate, transactionId: uuid(from: sale.clientTransactionId))
    }

    /// A failed result: same structure, without referenceNumber and authorisationCode.
    public static func declined(
        _ sale: VivaSale, message: String = "Transaction declined", transactionDate: String = "2019-09-13T12:14:19.8703452+03:00"
    ) -> VivaSaleCallback {
        VivaSaleCallback(
            callback: sale.callback, status: .fail, message: message, clientTransactionId: sale.clientTransactionId,
            amount: sale.amount, tipAmount: sale.tipAmount ?? 0, verificationMethod: "CONTACTLESS", cardType: "Debit Mastercard",
            accountNumber: "537489******1831", tid: "16016684", transactionDate: transactionDate,
            transactionId: uuid(from: sale.clientTransactionId))
    }

    /// A UUID-shaped identifier derived from `seed`.
    public static func uuid(from seed: String) -> String {
        let hex = Array(Digest.sha256Hex("viva-sandbox:" + seed).prefix(32))
        return String(hex[0..<8]) + "-" + String(hex[8..<12]) + "-4" + String(hex[13..<16]) + "-a" + String(hex[17..<20]) + "-"
            + String(hex[20..<32])
    }
}
