import PaypipeCore

/// The submitter's classification table for the receipt POST.
///
/// Retry policy: 5xx, 408, 429, a 200 whose body is not JSON, and transport failures are all
/// `.retry`, although a 5xx or a timeout may mean the receipt *was* registered. We argue the POST is
/// idempotent: it carries no money movement (Apple already charged the customer), and it is keyed
/// by Apple's `transactionId` — the same signed receipt for the same transaction registers the same
/// single entitlement. Apps resend receipts routinely (restore purchases, retries after network loss),
/// so receipt endpoints must deduplicate on the transaction id. The alternative, `.unknown`, would
/// resolve through getAccessStatus alone, which cannot tell "not yet processed" from "never received"
/// and would turn every lost receipt into a 60 s wait followed by a false failure.
public enum CleengReceiptResponse {
    public static func classify(_ response: HTTPResponseSpec, receipt: CleengReceipt) -> ProviderVerdict {
        classify(response, offerId: receipt.offerId, transactionId: receipt.transactionId)
    }

    /// 200: the receipt was well-formed and accepted; processing is asynchronous (up to 30 s), so the
    /// order is `pending` while the poller asks getAccessStatus.
    public static func classify(_ response: HTTPResponseSpec, offerId: String, transactionId: String) -> ProviderVerdict {
        switch response.status {
        case 200...299:
            guard bodyIsEmptyOrJSON(response.body) else {
                return .retry(reason: "cleeng receipt endpoint answered \(response.status) with a body that is not JSON")
            }
            return .pending([
                "receiptAccepted": true, "offerId": .string(offerId), "transactionId": .string(transactionId),
            ])
        case 401, 403:
            return .failed(
                code: .cleengUnauthorized,
                message: "cleeng receipt endpoint refused the credentials (HTTP \(response.status))")
        case 400:
            return .failed(code: .cleengBadRequest, message: "cleeng receipt endpoint rejected the request (HTTP 400)")
        case 404:
            return .failed(code: .cleengNotFound, message: "cleeng receipt endpoint not found (HTTP 404): check receiptURL")
        case 408, 429:
            return .retry(reason: "cleeng receipt endpoint answered HTTP \(response.status)")
        case 500...599:
            return .retry(reason: "cleeng receipt endpoint answered HTTP \(response.status)")
        default:
            return .failed(
                code: .cleengUnexpectedStatus,
                message: "cleeng receipt endpoint answered unexpected HTTP \(response.status)")
        }
    }

    /// No response at all (refused, reset, timed out). Safe to resend for the reason in the type's doc.
    public static func classifyTransportFailure(reason: String) -> ProviderVerdict {
        .retry(reason: "cleeng receipt endpoint unreachable: \(CleengParamRules.printable(reason, limit: 200))")
    }

    static func bodyIsEmptyOrJSON(_ body: [UInt8]) -> Bool {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return true }
        return (try? JSONValue.parse(body)) != nil
    }
}
