import Cleeng
import NetsEasy
import PaypipeCore
import PhonePe
import TrustPayments
import Viva

/// What the signer makes of one order.
public enum SignerOutput: Sendable, Equatable {
    /// A signed request for the submitters.
    case submit(SubmitWork)
    /// No HTTP call is needed (Trust Payments SDK JWT, Viva URL) or the order is rejected.
    case outcome(Outcome)
}

/// The signer stage's core: order in, signed request or outcome out. It only calls the
/// provider modules; its own job is choosing which one, and holding per-merchant signers that
/// are expensive to build (HMAC keys, checksum salts).
public struct SignerCore: Sendable {
    let config: PaypipeConfig
    let jwtSigners: [String: TPJWTSigner]
    let checksums: [String: PhonePeChecksum]

    public init(config: PaypipeConfig) {
        self.config = config
        jwtSigners = config.merchants.compactMapValues { $0.trustpayments.map(TPJWTSigner.init(config:)) }
        checksums = config.merchants.compactMapValues { $0.phonepe.map(PhonePeChecksum.init(config:)) }
    }

    /// `statusCheck`: the order was submitted before and its confirmation never came, so the
    /// work is the provider's status call alone (PhonePe auth status after a missed callback).
    public func sign(_ order: Order, acceptedAt: Int64, nowSeconds: Int64, attempts: Int = 1, statusCheck: Bool = false) -> SignerOutput {
        do {
            if statusCheck { return try statusCheckWork(order, acceptedAt: acceptedAt) }
            return try signOrThrow(order, acceptedAt: acceptedAt, nowSeconds: nowSeconds, attempts: attempts)
        } catch {
            let rejection = Outcome(
                order: order, status: .rejected, error: .init(code: error.code.rawValue, message: error.message), attempts: 0)
            return .outcome(rejection)
        }
    }

    private func statusCheckWork(_ order: Order, acceptedAt: Int64) throws(Rejection) -> SignerOutput {
        guard order.operation == .authInit else {
            throw Rejection(.unknownOperation, field: "operation", "only a phonepe authInit has a status check")
        }
        let (authInit, context) = try phonePeAuthInit(order, merchant: try config.merchant(order.merchant))
        return .submit(SubmitWork(
            order: order, request: authInit.statusRequest, resolve: authInit.statusRequest,
            context: context.merging([SubmitWork.statusCheckKey: "true"]) { $1 }, acceptedAt: acceptedAt))
    }

    /// The signed auth/init and the values its classification needs (`SubmitWork.context`).
    private func phonePeAuthInit(_ order: Order, merchant: MerchantConfig) throws(Rejection) -> (PhonePeAuthInit, [String: String]) {
        let phonepe = try merchant.require(\.phonepe, .phonepe)
        let checksum = checksums[order.merchant] ?? PhonePeChecksum(config: phonepe)
        let authInit = try PhonePeAuthInit(order: order, config: phonepe, checksum: checksum)
        return (authInit, ["authRequestId": authInit.authRequestId, "merchantId": phonepe.merchantId])
    }

    private func signOrThrow(_ order: Order, acceptedAt: Int64, nowSeconds: Int64, attempts: Int) throws(Rejection) -> SignerOutput {
        let merchant = try config.merchant(order.merchant)
        switch order.operation {
        case .subscriptionJwt:
            let tp = try merchant.require(\.trustpayments, .trustpayments)
            let signer = jwtSigners[order.merchant] ?? TPJWTSigner(config: tp)
            let jwt = try signer.sign(order: order, issuedAt: nowSeconds)
            return .outcome(Outcome(order: order, status: .pending, result: ["jwt": .string(jwt)], attempts: attempts))
        case .transactionUpdate, .transactionQuery:
            let tp = try merchant.require(\.trustpayments, .trustpayments)
            let request = try TPWebServices.request(for: order, config: tp)
            var resolve: HTTPRequestSpec?
            if request.kind == .transactionUpdate, let reference = request.transactionReference {
                resolve = TPWebServices.referenceQuery(transactionReference: reference, for: order.key, config: tp).http
            }
            return .submit(SubmitWork(order: order, request: request.http, resolve: resolve, acceptedAt: acceptedAt))
        case .createSubscription, .getSubscription, .chargeSubscription:
            let nets = try merchant.require(\.nets, .nets)
            let request = try NetsPayments.sign(order, config: nets, now: nowSeconds)
            return .submit(SubmitWork(order: order, request: request, acceptedAt: acceptedAt))
        case .authInit:
            let (authInit, context) = try phonePeAuthInit(order, merchant: merchant)
            return .submit(SubmitWork(order: order, request: authInit.request, resolve: authInit.statusRequest, context: context, acceptedAt: acceptedAt))
        case .appleReceipt:
            let cleeng = try merchant.require(\.cleeng, .cleeng)
            let request = try CleengReceipt.request(order: order, config: cleeng)
            return .submit(SubmitWork(order: order, request: request, acceptedAt: acceptedAt))
        case .sale:
            let viva = try merchant.require(\.viva, .viva)
            let sale = try VivaSale(order: order, config: viva)
            return .outcome(Outcome(order: order, status: .pending, result: sale.pendingResult, attempts: attempts))
        }
    }
}
