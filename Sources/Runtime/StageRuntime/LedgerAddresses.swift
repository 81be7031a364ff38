/// Every stable address the ledger binds, as bound (a `*` port resolved), and the one line
/// `paypipe-ledger` prints with them once it is ready. Whoever starts the other stages against
/// a ledger whose ports the kernel picked (the tests' harness, the benchmark) reads that line,
/// so it is written and read here only.
package struct LedgerAddresses: Sendable, Equatable {
    package var intake, outcomes, signQueue, signedIn, signedOut, results, ledgerRPC, pollQueue, outcomesReplay: String
    /// The operators' link (`endpoints.admin`); "none" when read from a ready line without it.
    package var admin: String

    package static let readyMarker = "paypipe-ledger ready"

    package init(
        intake: String, outcomes: String, signQueue: String, signedIn: String, signedOut: String, results: String, ledgerRPC: String,
        pollQueue: String, outcomesReplay: String, admin: String = "none"
    ) {
        self.admin = admin
        (self.intake, self.outcomes, self.signQueue, self.signedIn, self.signedOut) = (intake, outcomes, signQueue, signedIn, signedOut)
        (self.results, self.ledgerRPC, self.pollQueue, self.outcomesReplay) = (results, ledgerRPC, pollQueue, outcomesReplay)
    }

    /// The addresses of a ready line; nil when one is missing or not bound (still `:*`).
    package init?(readyLine: String) {
        let printed = Self.printed(in: readyLine)
        func bound(_ name: String) -> String? { printed[name].flatMap { $0.hasSuffix(":*") ? nil : $0 } }
        guard let intake = bound("intake"), let outcomes = bound("outcomes"), let signQueue = bound("signQueue"),
            let signedIn = bound("signedIn"), let signedOut = bound("signedOut"), let results = bound("results"),
            let ledgerRPC = bound("ledgerRPC"), let pollQueue = bound("pollQueue"), let outcomesReplay = bound("outcomesReplay")
        else { return nil }
        self.init(
            intake: intake, outcomes: outcomes, signQueue: signQueue, signedIn: signedIn, signedOut: signedOut, results: results,
            ledgerRPC: ledgerRPC, pollQueue: pollQueue, outcomesReplay: outcomesReplay, admin: bound("admin") ?? "none")
    }

    /// Each address by its name in the config's `endpoints`, in the ready line's order.
    package var all: [(name: String, address: String)] {
        [
            ("intake", intake), ("outcomes", outcomes), ("signQueue", signQueue), ("signedIn", signedIn), ("signedOut", signedOut),
            ("results", results), ("ledgerRPC", ledgerRPC), ("pollQueue", pollQueue), ("outcomesReplay", outcomesReplay), ("admin", admin),
        ]
    }

    package var readyLine: String { ([Self.readyMarker] + all.map { "\($0.name)=\($0.address)" }).joined(separator: " ") }

    /// Every `name=address` of a ready line, as printed.
    package static func printed(in readyLine: String) -> [String: String] {
        var printed: [String: String] = [:]
        for part in readyLine.split(separator: " ") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { printed[String(pair[0])] = String(pair[1]) }
        }
        return printed
    }
}
