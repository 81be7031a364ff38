import Logging
import PaypipeCore
import StageRuntime
import StageWire

/// The pollers' second duty (docs/protocol.md, "Subscription events"): entitlement checks of
/// subscriptions whose provider reports nothing when access lapses (Cleeng). The ledger keeps
/// when each is due; a poller takes the due ones, asks the provider once each, and hands back
/// what it read, from which the ledger makes the event and records it once.
struct EntitlementChecks: Sendable {
    let registry: ConnectorRegistry
    /// Checks taken per request to the ledger.
    let batch: Int

    init(registry: ConnectorRegistry, batch: Int = 100) {
        self.registry = registry
        self.batch = batch
    }

    /// Whether any connector's subscriptions are checked at all.
    var isNeeded: Bool { registry.connectors.contains { $0.entitlementChecking != nil } }

    /// One check's result: what the answer read, under the check's ticket; a check that got no
    /// readable answer reads nothing, and the ledger offers it again soon. The ledger derives
    /// the event from the reading itself.
    func result(of check: DueEntitlementCheck, answer: Result<HTTPResponseSpec, TransportFailure>?) -> EntitlementCheckResult {
        let reading: EntitlementReading?
        if case .success(let response)? = answer, let checking = registry.connector(for: check.provider)?.entitlementChecking {
            reading = checking.readCheck(response)
        } else {
            reading = nil
        }
        return EntitlementCheckResult(
            merchant: check.merchant, provider: check.provider, reference: check.reference, ticket: check.ticket, reading: reading)
    }

    /// Takes the due checks from the ledger, asks the provider, and hands the results back:
    /// one pass; returns how many were checked.
    func pass(ledger: any OrderDirectory, http: any ProviderHTTPTransport, logger: Logger) async -> Int {
        guard case .dueChecks(let due)? = try? await ledger.call(.dueChecks(limit: batch)), !due.isEmpty else { return 0 }
        let results = await withTaskGroup(of: EntitlementCheckResult.self) { group in
            for check in due {
                group.addTask {
                    guard let request = registry.connector(for: check.provider)?.entitlementChecking?.checkRequest(check.check) else {
                        return result(of: check, answer: nil)
                    }
                    return result(of: check, answer: await http.execute(request))
                }
            }
            var results: [EntitlementCheckResult] = []
            for await result in group { results.append(result) }
            return results
        }
        do {
            _ = try await ledger.call(.checked(results))
        } catch {
            // Not recorded: the ledger offers the checks again once their hand-out lapses.
            logger.warning("could not hand entitlement checks to the ledger", metadata: ["checks": "\(results.count)"])
        }
        return results.count
    }
}
