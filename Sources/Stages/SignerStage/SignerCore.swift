import PaypipeCore
import StageRuntime
import StageWire

/// What the signer makes of one order.
package enum SignerOutput: Sendable, Equatable {
    /// A signed request for the submitters.
    case submit(SubmitWork)
    /// No HTTP call is needed (Trust Payments SDK JWT, Viva URL) or the order is rejected.
    case outcome(Outcome)
    /// A status check the provider has no call for, before expiry: the order stays pending.
    case nothing
}

/// The signer stage's core: order in, signed request or outcome out. Every provider decision
/// is the order's connector's.
package struct SignerCore: Sendable {
    let registry: ConnectorRegistry

    package init(registry: ConnectorRegistry) {
        self.registry = registry
    }

    package func sign(
        _ order: Order, acceptedAt: Int64, nowSeconds: Int64, purpose: DispatchPurpose = .submit, pending: [String: JSONValue]? = nil,
        generation: Int64 = 1, token: UInt64 = 0
    ) -> SignerOutput {
        do throws(Rejection) {
            guard let connector = registry.connector(for: order.provider) else {
                throw Rejection(.unknownProvider, field: "provider", "no connector is registered for \(order.provider.rawValue)")
            }
            return try connector.signWork(
                order, purpose: purpose, pending: pending ?? [:], acceptedAt: acceptedAt, nowSeconds: nowSeconds, generation: generation,
                token: token)
        } catch {
            // A status check of an accepted, pending order cannot make it `rejected`: the
            // provider may hold its money, so a person looks at it. Nor can a redelivery, whose
            // first copy may have reached the provider before signing it stopped working (a
            // merchant's settings removed, an end date now past).
            if purpose == .expiryCheck { return .outcome(.needsReview(order, "the status check could not be signed: \(error.message)")) }
            if purpose == .statusCheck { return .nothing }
            if generation > 1 {
                return .outcome(.needsReview(order, "redelivered (dispatch \(generation)) and could not be signed again: \(error.message)"))
            }
            return .outcome(Outcome(order: order, status: .rejected, error: .init(code: error.code.rawValue, message: error.message), attempts: 0))
        }
    }

    package func sign(_ dispatch: DispatchFrame, nowSeconds: Int64) -> SignerOutput {
        sign(
            dispatch.order, acceptedAt: dispatch.acceptedAt, nowSeconds: nowSeconds, purpose: dispatch.purpose, pending: dispatch.pending,
            generation: dispatch.generation, token: dispatch.token)
    }
}

extension ProviderConnector {
    /// `sign` with the connector's context written for the wire.
    func signWork(
        _ order: Order, purpose: DispatchPurpose, pending: [String: JSONValue], acceptedAt: Int64, nowSeconds: Int64, generation: Int64,
        token: UInt64
    ) throws(Rejection) -> SignerOutput {
        let signed: Signed<Context>
        if purpose.isStatusCheck {
            guard let check = try signStatusCheck(order, pending: pending, purpose: purpose, nowSeconds: nowSeconds) else {
                guard purpose == .expiryCheck else { return .nothing }
                return .outcome(.needsReview(order, "\(order.provider.rawValue) has no status call that can tell what became of this order"))
            }
            signed = check
        } else {
            signed = try sign(order, purpose: purpose, nowSeconds: nowSeconds)
        }
        switch signed {
        case .request(let signed):
            return .submit(
                SubmitWork(
                    order: order, request: signed.request, resolve: signed.resolve, context: signed.context.json, purpose: purpose,
                    pending: purpose.isStatusCheck ? pending : nil, acceptedAt: acceptedAt, generation: generation, token: token))
        case .outcome(let status, let result):
            return .outcome(Outcome(order: order, status: status, result: result))
        }
    }
}
