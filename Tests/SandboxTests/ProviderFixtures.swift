import CleengTesting
import NetsEasyTesting
import PaypipeCore
import PhonePeTesting
import TrustPaymentsTesting
import VivaTesting

// The provider fixtures come from each provider's testing module (`Sources/Providers/<Name>/Testing`).

extension TPFixtures {
    /// A verdict's case (and failure code), for compact expectations.
    static func kind(_ verdict: ProviderVerdict?) -> String { verdict?.kind ?? "nil" }
}
