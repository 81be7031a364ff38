import PaypipeCore
import Sandbox
import TrustPayments

/// REFUND as Trust Payments' REFUND article describes it: the request names the AUTH as
/// `parenttransactionreference` on the request's own `sitereference`; without `baseamount` the
/// whole rest of the AUTH is refunded. The parent must be an AUTH that was not declined and has
/// settled (`settlestatus` 100), and no refund may take the AUTH's refunds past its amount. The
/// codes are those of Trust Payments' `errormessages.json` (Python SDK). Nothing is replayed: a
/// REFUND has no idempotency key at Trust Payments, so the same request twice refunds twice,
/// each with a transactionreference of its own. Test amount: `baseamount` 70000 is declined
/// online by the issuer (errorcode 70000, `settlestatus` 3), as the sandbox's payments are.
extension TPSandbox {
    /// The answer to a REFUND entry. `records` are the parent AUTH (when the sandbox knows it)
    /// and the refunds already made of it.
    package static func refund(_ request: [String: JSONValue], config: TrustPaymentsConfig, records: [[String: JSONValue]]) -> [String: JSONValue] {
        let type = "REFUND"
        guard let site = request["sitereference"]?.stringValue else { return error("30000", "Invalid field", field: "sitereference", type: type) }
        guard site == config.siteReference else { return error(TPErrorCode.unauthenticated, "Unauthenticated", field: "sitereference", type: type) }
        guard let parentReference = request["parenttransactionreference"]?.stringValue, !parentReference.isEmpty else {
            return error("20004", "Missing parent", field: "parenttransactionreference", type: type)
        }
        guard let parent = records.first(where: { $0["transactionreference"]?.stringValue == parentReference }) else {
            return error("20004", "Missing parent", field: "parenttransactionreference", type: type)
        }
        guard parent["requesttypedescription"]?.stringValue == "AUTH" else { return error("20006", "Invalid parent", type: type) }
        guard parent["errorcode"]?.stringValue == "0" else { return error("20011", "Parent declined", type: type) }
        guard parent["settlestatus"]?.stringValue == "100" else { return error("20005", "Parent not settled", type: type) }
        let captured = parent["baseamount"]?.stringValue.flatMap { Int64($0) } ?? 0
        let refunded = records.filter { isRefund($0, of: parentReference) && $0["errorcode"]?.stringValue == "0" }
            .compactMap { $0["baseamount"]?.stringValue.flatMap { Int64($0) } }.reduce(0, +)
        let amount: Int64
        if let stated = request["baseamount"] {
            guard let text = stated.stringValue, isValidUpdate("baseamount", text), let value = Int64(text) else {
                return error("30000", "Invalid field", field: "baseamount", type: type)
            }
            amount = value
        } else {
            amount = captured - refunded
        }
        guard amount > 0, refunded + amount <= captured else { return error("20007", "Amount too great", field: "baseamount", type: type) }
        let count = records.filter { isRefund($0, of: parentReference) }.count
        let declined = amount == declineAmount
        var entry: [String: JSONValue] = [
            "requesttypedescription": .string(type), "errorcode": declined ? .string(TPErrorCode.declined) : "0",
            "errormessage": declined ? "Decline" : "Ok",
            "transactionreference": .string(transactionReference(seed: "\(parentReference)\u{0}refund\u{0}\(count)")),
            "parenttransactionreference": .string(parentReference), "baseamount": .string(String(amount)),
            "settlestatus": declined ? "3" : "0", "paymenttypedescription": parent["paymenttypedescription"] ?? "VISA",
        ]
        if let currency = parent["currencyiso3a"] { entry["currencyiso3a"] = currency }
        if let order = request["orderreference"]?.stringValue { entry["orderreference"] = .string(order) }
        return entry
    }

    package static func isRefund(_ record: [String: JSONValue], of parent: String) -> Bool {
        record["requesttypedescription"]?.stringValue == "REFUND" && record["parenttransactionreference"]?.stringValue == parent
    }
}
