import PaypipeCore
import StageRuntime
import StageWire

/// What the signer makes of one order.
package enum SignerOutput: Sendable, Equatable {
    /// A signed request for the submitters.
    case submit(SubmitWork)
    /// No HTTP call is needed (Trust Payments SDK JWT, Viva URL) or the order is rejected.
    case outcome(Outcome)
}

/// The signer stage's core: order in, signed request or outcome out. Every provider decision
/// is the order's connector's.
package struct SignerCore: Sendable {
    let registry: ConnectorRegistry

    package init(registry: ConnectorRegistry) {
        self.registry = registry
    }

    package func sign(_ order: Order, acceptedAt: Int64, nowSeconds: Int64, purpose: DispatchPurpose = .submit, generation: Int64 = 1) -> SignerOutput {
        do throws(Rejection) {
            guard let connector = registry.connector(for: order.provider) else {
                throw Rejection(.unknownProvider, field: "provider", "no connector is registered for \(order.provider.rawValue)")
            }
            return try connector.signWork(order, purpose: purpose, acceptedAt: acceptedAt, nowSeconds: nowSeconds, generation: generation)
        } catch {
            return .outcome(Outcome(order: order, status: .rejected, error: .init(code: error.code.rawValue, message: error.message), attempts: 0))
        }
    }
}

extension ProviderConnector {
    /// `sign` with the connector's context written for the wire.
    func signWork(_ order: Order, purpose: DispatchPurpose, acceptedAt: Int64, nowSeconds: Int64, generation: Int64) throws(Rejection) -> SignerOutput {
        switch try sign(order, purpose: purpose, nowSeconds: nowSeconds) {
        case .request(let signed):
            .submit(SubmitWork(
                order: order, request: signed.request, resolve: signed.resolve, context: signed.context.json, purpose: purpose,
                acceptedAt: acceptedAt, generation: generation))
        case .outcome(let status, let result):
            .outcome(Outcome(order: order, status: status, result: result))
        }
    }
}
