import Cleeng
import NetsEasy
import PaypipeCore
import PhonePe
import TrustPayments
import Viva

/// The registry's one line per provider: adding a provider is a connector module plus a line here.
package enum StandardConnectors {
    package static let all: [any ProviderConnector.Type] = [
        TrustPaymentsConnector.self,
        NetsConnector.self,
        PhonePeConnector.self,
        CleengConnector.self,
        VivaConnector.self,
    ]

    /// The merchant sections these connectors read (`PaypipeConfig.parse`).
    package static var sections: [any MerchantSection.Type] { all.map { $0.settingsSection } }

    package static func registry(config: PaypipeConfig) async -> ConnectorRegistry {
        await ConnectorRegistry(all, config: config)
    }
}
