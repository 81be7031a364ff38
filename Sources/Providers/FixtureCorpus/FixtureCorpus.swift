import Foundation
import PaypipeCore

/// One message as a provider publishes it: a request paypipe sends (`outgoing`) or anything it
/// receives (`incoming`), written from the provider's documentation, with the page or file it
/// comes from and what paypipe must read from it. One JSON file in `<provider>/Fixtures/<direction>/`.
public struct Fixture: Sendable, CustomStringConvertible {
    public enum Direction: String, Sendable, CaseIterable {
        case incoming, outgoing
    }

    /// The file name without `.json`: `<kind>--<variant>`.
    public let name: String
    public let direction: Direction
    /// Where the shape and the values come from, in one line.
    public let source: String
    public let kind: String
    public let summary: String
    /// The HTTP status of a response.
    public let status: Int?
    public let headers: [String: String]
    /// `{"json": …}`, `{"form": [[name, value], …]}`, `{"jwtPayload": …}` or `{"text": …}`.
    public let message: JSONValue
    /// `{"accepted": Bool, "meaning": {…}}`.
    public let expect: JSONValue

    public var description: String { name }

    public var json: JSONValue? { message["json"] }
    public var jwtPayload: JSONValue? { message["jwtPayload"] }
    public var text: String? { message["text"]?.stringValue }

    /// The JSON body as bytes, or the text's.
    public var jsonBody: [UInt8] {
        if let json { return json.bytes }
        return Array((text ?? "").utf8)
    }

    /// Form or query fields in the order the provider sends them.
    public var form: [(name: String, value: String)] {
        (message["form"]?.arrayValue ?? []).compactMap { pair in
            guard let items = pair.arrayValue, items.count == 2, let name = items[0].stringValue else { return nil }
            return (name, items[1].stringValue ?? Self.plain(items[1]))
        }
    }

    /// `form` as `application/x-www-form-urlencoded`.
    public var formBody: [UInt8] {
        Array(form.map { Self.formEncoded($0.name) + "=" + Self.formEncoded($0.value) }.joined(separator: "&").utf8)
    }

    /// Whether paypipe must accept the message (every genuine provider message: true).
    public var accepted: Bool { expect["accepted"]?.boolValue ?? true }

    /// What paypipe must read from the message under `key`.
    public func meaning(_ key: String) -> JSONValue? { expect["meaning"]?[key] }

    /// `meaning(key)` as text: strings as they are, numbers and booleans as JSON writes them.
    public func meaningText(_ key: String) -> String? { meaning(key).map(Self.plain) }

    static func plain(_ value: JSONValue) -> String {
        if let string = value.stringValue { return string }
        return String(decoding: value.bytes, as: UTF8.self)
    }

    static func formEncoded(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._*")
        let escaped = text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
        return escaped.replacingOccurrences(of: "%20", with: "+")
    }
}

extension Fixture {
    /// A verdict's case as a fixture's `meaning.verdict` names it (`none`: no verdict).
    public static func verdictName(_ verdict: ProviderVerdict?) -> String {
        switch verdict {
        case .succeeded?: "succeeded"
        case .pending?: "pending"
        case .failed?: "failed"
        case .retry?: "retry"
        case .unknown?: "unknown"
        case .neverSeen?: "neverSeen"
        case nil: "none"
        }
    }

    /// What a `succeeded` or `pending` verdict carries for the outcome; empty for the others.
    public static func verdictResult(_ verdict: ProviderVerdict?) -> [String: JSONValue] {
        switch verdict {
        case .succeeded(let result)?, .pending(let result)?: result
        default: [:]
        }
    }
}

/// Every fixture of one provider.
public struct FixtureCorpus: Sendable {
    public let fixtures: [Fixture]

    /// Reads `folder/incoming/*.json` and `folder/outgoing/*.json`; a file that is not a fixture
    /// stops the load with its name and what is wrong.
    public init(folder: String) throws(FixtureError) {
        var fixtures: [Fixture] = []
        for direction in Fixture.Direction.allCases {
            let directory = folder + "/" + direction.rawValue
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
            for file in names {
                fixtures.append(try Self.fixture(at: directory + "/" + file, direction: direction))
            }
        }
        self.fixtures = fixtures
    }

    /// The corpus kept in `Fixtures/` beside the `Testing/` folder that holds `file`
    /// (pass `#filePath`).
    public init(besideTestingFile file: String) throws(FixtureError) {
        let testing = (file as NSString).deletingLastPathComponent
        try self.init(folder: (testing as NSString).deletingLastPathComponent + "/Fixtures")
    }

    public func of(kind: String) -> [Fixture] { fixtures.filter { $0.kind == kind } }

    /// The fixture of that name; traps when there is none, which is a mistake in a test.
    public func named(_ name: String) -> Fixture {
        guard let fixture = fixtures.first(where: { $0.name == name }) else { fatalError("no fixture named \(name)") }
        return fixture
    }

    static func fixture(at path: String, direction: Fixture.Direction) throws(FixtureError) -> Fixture {
        let name = String(((path as NSString).lastPathComponent).dropLast(".json".count))
        guard let data = FileManager.default.contents(atPath: path) else { throw FixtureError(file: path, problem: "cannot be read") }
        let document: JSONValue
        do { document = try JSONValue.parse(Array(data)) } catch { throw FixtureError(file: path, problem: "is not JSON: \(error)") }
        func text(_ key: String) throws(FixtureError) -> String {
            guard let value = document[key]?.stringValue, !value.isEmpty else { throw FixtureError(file: path, problem: "has no \(key)") }
            return value
        }
        guard let message = document["message"], message.objectValue?.count == 1 else {
            throw FixtureError(file: path, problem: "needs a message of one member: json, form, jwtPayload or text")
        }
        var headers: [String: String] = [:]
        for (header, value) in document["headers"]?.objectValue ?? [:] { headers[header] = value.stringValue ?? Fixture.plain(value) }
        return Fixture(
            name: name, direction: direction, source: try text("source"), kind: try text("kind"), summary: try text("summary"),
            status: document["status"]?.integerValue.map { Int($0) }, headers: headers, message: message,
            expect: document["expect"] ?? .null)
    }
}

public struct FixtureError: Error, CustomStringConvertible {
    public let file: String
    public let problem: String
    public var description: String { "fixture \(file) \(problem)" }
}

extension JSONValue {
    /// Every member path in this value, `a`, `a.b`, `a[].c`: what a message's shape is made of,
    /// to compare an emulator's answer with what the provider publishes.
    public var keyPaths: Set<String> {
        var paths: Set<String> = []
        collectKeyPaths(prefix: "", into: &paths)
        return paths
    }

    func collectKeyPaths(prefix: String, into paths: inout Set<String>) {
        switch self {
        case .object(let members):
            for (key, value) in members {
                let path = prefix.isEmpty ? key : prefix + "." + key
                paths.insert(path)
                value.collectKeyPaths(prefix: path, into: &paths)
            }
        case .array(let items):
            for item in items { item.collectKeyPaths(prefix: prefix + "[]", into: &paths) }
        default: break
        }
    }
}

extension FixtureCorpus {
    /// The member paths that any `json` or `jwtPayload` message of `kind` shows.
    public func keyPaths(ofKind kind: String) -> Set<String> {
        of(kind: kind).reduce(into: Set<String>()) { paths, fixture in
            paths.formUnion((fixture.json ?? fixture.jwtPayload)?.keyPaths ?? [])
        }
    }

    /// The member paths of `answer` that no message of `kind` shows, sorted: what an emulator
    /// says that the provider never publishes.
    public func unpublishedPaths(in answer: JSONValue, kind: String) -> [String] {
        answer.keyPaths.subtracting(keyPaths(ofKind: kind)).sorted()
    }

    /// The form field names that any `form` message of `kind` shows.
    public func formFields(ofKind kind: String) -> Set<String> {
        Set(of(kind: kind).flatMap { $0.form.map(\.name) })
    }
}
