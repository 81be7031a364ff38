import Foundation
import PaypipeCore
import PhonePe
import Sandbox

/// How a sandbox S2S callback is made: genuinely, or broken in one way for negative tests.
public enum PhonePeSandboxCallbackVariant: String, Sendable, Equatable, CaseIterable {
    case genuine
    /// Correct body, X-VERIFY with one digest digit changed (→ BAD_CHECKSUM).
    case wrongChecksum
    /// Genuinely signed, but the amount is one paisa more than the mandate's (→ AMOUNT_MISMATCH).
    case wrongAmount
}

/// An S2S callback ready to POST to `url` (the auth/init's X-CALLBACK-URL).
public struct PhonePeSandboxCallback: Sendable, Equatable {
    public var url: String
    public var body: [UInt8]
    public var xVerify: String

    public var request: HTTPRequestSpec {
        HTTPRequestSpec(
            method: .POST, url: url, headers: [HTTPHeader("Content-Type", "application/json"), HTTPHeader("X-VERIFY", xVerify)], body: body)
    }
}

extension PhonePeSandbox {
    /// The AUTH callback PhonePe sends when the mandate reaches `outcome`, shaped like PhonePe's
    /// S2S callback examples. A PENNY_DROP mandate has no auth debit, so it carries no
    /// transactionDetails (except for `.wrongAmount`, which has to carry an amount to be wrong).
    public func callback(
        for mandate: PhonePeSandboxMandate, outcome: PhonePeSandboxAuthOutcome, variant: PhonePeSandboxCallbackVariant = .genuine
    ) -> PhonePeSandboxCallback {
        var amount = mandate.amount
        if variant == .wrongAmount { amount = (amount ?? 100) + 1 }
        var data = authData(for: mandate, outcome: outcome, amount: amount)
        data["callbackType"] = "AUTH"
        let document: JSONValue = [
            "success": true, "code": "SUCCESS", "message": .string(Self.message(for: outcome)), "data": .object(data),
        ]
        let response = Data(document.bytes).base64EncodedString()
        var xVerify = checksum(for: response)
        if variant == .wrongChecksum {
            let first = xVerify.removeFirst()
            xVerify = (first == "0" ? "1" : "0") + xVerify
        }
        return PhonePeSandboxCallback(url: mandate.callbackURL, body: Array("{\"response\":\"\(response)\"}".utf8), xVerify: xVerify)
    }

    /// `data` of a callback or a status response for this mandate in this state (PhonePe's S2S
    /// callback and auth-status documentation: CREATED without transactionDetails while pending).
    /// `namesAccount`: a completed auth's paymentMode also names the account and the mandate, as
    /// the auth-status sample does (the seed's callback samples do not).
    package func authData(
        for mandate: PhonePeSandboxMandate, outcome: PhonePeSandboxAuthOutcome, amount: Int64?, namesAccount: Bool = false
    ) -> [String: JSONValue] {
        var data: [String: JSONValue] = [
            "merchantId": .string(mandate.merchantId), "authRequestId": .string(mandate.authRequestId),
        ]
        let subscriptionState: String
        switch outcome {
        case .pending: subscriptionState = "CREATED"
        case .completed: subscriptionState = "ACTIVE"
        case .failed: subscriptionState = "FAILED"
        }
        data["subscriptionDetails"] = ["subscriptionId": .string(mandate.subscriptionId), "state": .string(subscriptionState)]
        if outcome != .pending, let amount {
            let completed = outcome == .completed
            // The seed's callbacks: payResponseCode SUCCESS or AUTHORIZATION_FAILED, one paymentMode
            // of mode, amount, utr. The ACTIVE auth-status sample's paymentMode also names the
            // account (ifsc, maskedAccountNumber) and the mandate (umn).
            let seed = "\(mandate.merchantId)/\(mandate.authRequestId)"
            var mode: [String: JSONValue] = [
                "mode": "ACCOUNT", "amount": .integer(amount), "utr": .string(String(mandate.providerReferenceId.suffix(12))),
            ]
            if completed && namesAccount { mode.merge(Self.accountFields(seed: seed)) { $1 } }
            data["transactionDetails"] = [
                "providerReferenceId": .string(mandate.providerReferenceId),
                "amount": .integer(amount),
                "state": completed ? "COMPLETED" : "FAILED",
                "payResponseCode": completed ? "SUCCESS" : "AUTHORIZATION_FAILED",
                "paymentModes": .array([.object(mode)]),
            ]
        }
        return data
    }

    /// The account and mandate a paymentMode names, in the forms of PhonePe's samples:
    /// ifsc `HDFC0000999`, maskedAccountNumber `XXXXXX999`, umn `<32 hex>@ybl`.
    package static func accountFields(seed: String) -> [String: JSONValue] {
        let number = Self.digits("account|" + seed, count: 9)
        return [
            "ifsc": .string("HDFC0" + String(number.prefix(6))), "maskedAccountNumber": .string("XXXXXX" + String(number.suffix(3))),
            "umn": .string(String(SandboxCrypto.sha256Hex(Array(("umn|" + seed).utf8)).prefix(32)) + "@ybl"),
        ]
    }

    package static func message(for outcome: PhonePeSandboxAuthOutcome) -> String {
        switch outcome {
        case .pending: "Your subscription is created."
        case .completed: "Your subscription is active."
        case .failed: "Your subscription is failed."
        }
    }
}
