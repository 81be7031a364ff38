import PaypipeCore

extension PaypipeConfig {
    /// Loads a config whose merchants may name any of the standard connectors' providers.
    package static func load(path: String, sources: Sources = .process) throws(ConfigError) -> PaypipeConfig {
        try load(path: path, sources: sources, sections: StandardConnectors.sections)
    }

    /// Parses a config whose merchants may name any of the standard connectors' providers.
    package static func parse(_ bytes: [UInt8], sources: Sources = .process) throws(ConfigError) -> PaypipeConfig {
        try parse(bytes, sources: sources, sections: StandardConnectors.sections)
    }
}
