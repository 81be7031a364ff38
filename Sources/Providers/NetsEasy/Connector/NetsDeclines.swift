import PaypipeCore

/// Which failed Nets charges may be tried again (docs/protocol.md, "Declines"). Nexi's
/// subscription-retry guide (../shared/PROVIDERS-MONEY.md §2, [NX-RETRY]) sorts declines into
/// codes that must never be retried ("the issuer will never approve", retrying costs scheme
/// fines; lost or stolen cards among them), insufficient funds (retry days later) and technical
/// failures (retry later); its error-code page lists the common ones, 01, 03, 04, 05, 41, 51
/// and 57 [NX-ERR]. The guide's excerpt ends after 04, and whether a 402's `code` always carries
/// these codes is not documented: a code not in this table is retried.
enum NetsDeclines {
    /// The codes of a 402's `code`, as `NETS_DECLINED_<code>` carries them.
    static let table: [String: DeclineClass] = [
        // [NX-RETRY]: "issuer will never approve", e.g. 04 (pick up card).
        "04": .hard,
        // [NX-RETRY]: lost or stolen cards are never retried; 41 lost, 43 stolen (ISO 8583).
        "41": .hard, "43": .hard,
        // [NX-ERR] 57: transaction not permitted to the cardholder; the card will not allow it on a retry (inferred).
        "57": .hard,
        // [NX-RETRY]: insufficient funds, retried days later.
        "51": .soft,
        // [NX-ERR] 01 refer to issuer, 05 do not honour: generic refusals that may pass later (inferred).
        "01": .soft, "05": .soft,
        // [NX-ERR] 03: invalid merchant, the merchant's Nets agreement, not the customer's card (inferred).
        "03": .notADecline,
    ]

    /// A 402's `code`, when it is one a decline code can be built from: 1 to 8 digits and
    /// capitals (Nexi's numeric codes, ISO 8583's two characters).
    static func declineCode(_ value: JSONValue?) -> String? {
        guard let code = value?.stringValue ?? value?.integerValue.map(String.init), (1...8).contains(code.utf8.count),
            code.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) })
        else { return nil }
        return code
    }

    static func declineClass(of code: String) -> DeclineClass? {
        let declined = OutcomeErrorCode.netsDeclined.rawValue + "_"
        if code.hasPrefix(declined) { return table[String(code.dropFirst(declined.utf8.count))] ?? .soft }
        switch OutcomeErrorCode(rawValue: code) {
        // Nets does not know the subscription, or the payment has none: nothing left to charge.
        case .netsNotFound, .netsSubscriptionNotFound: return .hard
        // The merchant's secret key, access or request: a person fixes the config.
        case .netsUnauthorized, .netsForbidden, .netsBadRequest, .netsInvalidResponse, .netsUnknownRequest: return .notADecline
        case .netsDeclined, .netsReservationFailed: return .soft
        default: return nil
        }
    }
}
