import PaypipeCore

/// The config `paypipe up` writes when given none: every provider pointed at the local sandbox,
/// with throwaway demo credentials (the sandbox reads the same file, so both sides agree), and
/// so marked `insecureForTesting`.
/// Tests and benchmarks use it too, with their own endpoints and timers. Each provider's
/// section comes from its own `MerchantSection.demo`.
package enum DemoConfig {
    /// - Parameters:
    ///   - providerURL: every provider's API URL (e.g. an external server for benchmarks);
    ///     default: the sandbox's route for each provider under `sandboxURL`.
    ///   - endpoints: further `endpoints` keys (docs/configuration.md).
    ///   - timers: `timers` keys.
    ///   - extraMerchants: further merchant profiles, by name (e.g. a Viva merchant without API credentials).
    ///   - leavingOut: optional demo settings to leave out, as `<provider>.<key>` (e.g. `nets.webhookURL`).
    ///   - sections: the providers in the demo merchant.
    ///   - subscriptionEvents: whether the demo merchant's order system takes subscription events.
    package static func text(
        sandboxURL: String, callbacks: String = "127.0.0.1:8080", providerURL: String? = nil,
        endpoints: [String: String] = [:], timers: [String: Int64] = [:], extraMerchants: [String: JSONValue] = [:],
        leavingOut: Set<String> = [], sections: [any MerchantSection.Type] = StandardConnectors.sections, subscriptionEvents: Bool = true
    ) -> String {
        var merchant: [String: JSONValue] = [:]
        for section in sections {
            let name = section.provider.rawValue
            let environment = DemoEnvironment(
                sandboxURL: sandboxURL + "/" + name, providerURL: providerURL, callbacks: callbacks,
                leftOut: Set(leavingOut.compactMap { $0.hasPrefix(name + ".") ? String($0.dropFirst(name.count + 1)) : nil }))
            merchant[name] = section.demo(environment)
        }
        // One provider per line, so that the file `paypipe up` writes reads easily.
        let providers = merchant.keys.sorted().map { "      \(JSONValue.string($0).serialized): \(merchant[$0]!.serialized)" }
        // The demo's order system takes subscription events (docs/protocol.md, "Subscription events").
        let options = subscriptionEvents ? ["      \"subscriptionEvents\": true"] : []
        var merchants = ["    \"default\": {\n" + (options + providers).joined(separator: ",\n") + "\n    }"]
        merchants += extraMerchants.keys.sorted().map { "    \(JSONValue.string($0).serialized): \(extraMerchants[$0]!.serialized)" }
        var endpointValues = endpoints
        endpointValues["callbacks"] = callbacks
        var sections = [
            "  \"merchants\": {\n" + merchants.joined(separator: ",\n") + "\n  }",
            "  \"endpoints\": \(JSONValue.object(endpointValues.mapValues(JSONValue.string)).serialized)",
        ]
        if !timers.isEmpty { sections.append("  \"timers\": \(JSONValue.object(timers.mapValues(JSONValue.integer)).serialized)") }
        // Its credentials are the public demo ones: a stage refuses them without this.
        sections.append("  \"insecureForTesting\": true")
        return "{\n" + sections.joined(separator: ",\n") + "\n}\n"
    }
}
