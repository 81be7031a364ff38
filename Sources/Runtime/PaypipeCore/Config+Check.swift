extension PaypipeConfig {
    /// Every error in a config, not only the first (`paypipe config check`), and what a stage
    /// would refuse to start with (`unsafeForProduction`). The parser stops at
    /// the first error, so the check parses again with the offending value taken out, and with
    /// a missing one's enclosing object taken out, until the rest reads. An error inside what was
    /// taken out is found only once the first is fixed; no error is reported that is not one.
    public static func check(
        _ bytes: [UInt8], sources: Sources = .process, sections: [any MerchantSection.Type], maxErrors: Int = 100
    ) -> [ConfigError] {
        guard var document = try? JSONValue.parse(bytes) else {
            do {
                _ = try parse(bytes, sources: sources, sections: sections)
                return []
            } catch { return [error] }
        }
        var errors: [ConfigError] = []
        while errors.count < maxErrors {
            do {
                let config = try parse(document.bytes, sources: sources, sections: sections)
                return errors + config.unsafeForProduction
            } catch {
                guard !errors.contains(error) else { return errors }
                errors.append(error)
                var path = Self.steps(of: error.path)
                guard !path.isEmpty else { return errors }
                // A value that is there is taken out; a required one that is missing takes its
                // enclosing object with it.
                if !Self.remove(path, from: &document) {
                    path.removeLast()
                    guard !path.isEmpty, Self.remove(path, from: &document) else { return errors }
                }
            }
        }
        return errors
    }

    /// A ConfigReader path (`merchants.acme.nets.secretKey`, `curve.upstream[0].name`) as steps.
    enum Step: Equatable {
        case key(String)
        case index(Int)
    }

    static func steps(of path: String) -> [Step] {
        var steps: [Step] = []
        for part in path.split(separator: ".", omittingEmptySubsequences: true) {
            var name = Substring(part)
            var indexes: [Int] = []
            while name.hasSuffix("]"), let open = name.lastIndex(of: "["),
                let index = Int(name[name.index(after: open)..<name.index(before: name.endIndex)])
            {
                indexes.insert(index, at: 0)
                name = name[..<open]
            }
            if !name.isEmpty { steps.append(.key(String(name))) }
            steps += indexes.map(Step.index)
        }
        return steps
    }

    /// Takes the value at `path` out of `value`; false when there is none.
    static func remove(_ path: [Step], from value: inout JSONValue) -> Bool {
        guard let first = path.first else { return false }
        let rest = Array(path.dropFirst())
        switch (first, value) {
        case (.key(let key), .object(var object)):
            guard var child = object[key] else { return false }
            if rest.isEmpty {
                object[key] = nil
            } else {
                guard remove(rest, from: &child) else { return false }
                object[key] = child
            }
            value = .object(object)
            return true
        case (.index(let index), .array(var items)):
            guard items.indices.contains(index) else { return false }
            if rest.isEmpty {
                items.remove(at: index)
            } else {
                guard remove(rest, from: &items[index]) else { return false }
            }
            value = .array(items)
            return true
        default:
            return false
        }
    }
}
