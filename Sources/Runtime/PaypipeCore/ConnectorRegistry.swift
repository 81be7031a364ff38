/// Provider → connector, for one stage process. The executables build it from the standard
/// list (the `Connectors` module); tests add their own connectors to it.
public struct ConnectorRegistry: Sendable {
    public let connectors: [any ProviderConnector]
    public let catalog: OrderCatalog
    private let byProvider: [Provider: any ProviderConnector]

    public init(connectors: [any ProviderConnector]) {
        var byProvider: [Provider: any ProviderConnector] = [:]
        for connector in connectors {
            precondition(byProvider[connector.provider] == nil, "two connectors registered for \(connector.provider)")
            byProvider[connector.provider] = connector
        }
        self.byProvider = byProvider
        self.connectors = connectors
        catalog = OrderCatalog(connectors.flatMap { type(of: $0).operations })
    }

    /// Builds every connector from `config` (a stage without secrets passes a config whose
    /// secrets are empty).
    public init(_ types: [any ProviderConnector.Type], config: PaypipeConfig) async {
        var connectors: [any ProviderConnector] = []
        for type in types { connectors.append(await type.init(config: config)) }
        self.init(connectors: connectors)
    }

    public func connector(for provider: Provider) -> (any ProviderConnector)? { byProvider[provider] }
}
