/// One operation a connector offers, with the contract rule the intake enforces for it
/// (amount and currency are required where the operation moves money).
public struct OperationSpec: Sendable {
    public let operation: Operation
    /// Whether an order with these params moves money (PhonePe decides by `authWorkflowType`).
    public let movesMoney: @Sendable ([String: JSONValue]) -> Bool

    public init(_ operation: Operation, movesMoney: @escaping @Sendable ([String: JSONValue]) -> Bool) {
        self.operation = operation
        self.movesMoney = movesMoney
    }

    public init(_ operation: Operation, movesMoney: Bool) {
        self.init(operation, movesMoney: { _ in movesMoney })
    }
}

/// Every provider and operation the pipeline accepts: what the registered connectors declare.
/// Intake validates orders against it, so an order for a provider nobody registered is
/// `rejected` with `UNKNOWN_PROVIDER`.
public struct OrderCatalog: Sendable {
    private var specs: [Provider: [OperationSpec]] = [:]
    /// In the order the connectors were registered, for messages that list them.
    public private(set) var providers: [Provider] = []

    public init(_ declared: [OperationSpec]) {
        for spec in declared {
            let provider = spec.operation.provider
            if specs[provider] == nil { providers.append(provider) }
            specs[provider, default: []].append(spec)
        }
    }

    /// Names are compared byte for byte (Swift's `==` on String would also match canonically
    /// equivalent spellings).
    public func provider(named name: String) -> Provider? {
        providers.first { $0.rawValue.hasSameUTF8(as: name) }
    }

    public func operations(of provider: Provider) -> [OperationSpec] { specs[provider] ?? [] }

    public func operation(named name: String, of provider: Provider) -> OperationSpec? {
        operations(of: provider).first { $0.operation.rawValue.hasSameUTF8(as: name) }
    }
}
