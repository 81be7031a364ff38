import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The text log lines every stage writes (`--log-format text`, the default), in swift-log's
/// `StreamLogHandler` format: `<time> <level> <label>: <key=value …> [<source>] <message>`.
/// Its own because `StreamLogHandler` asks the C library for the local time on every line,
/// which looks at the time zone file each time: two lines per order made that a large part of
/// the ledger's work. The time is formatted once per second here.
package struct TextLogHandler: StageLogHandler {
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    package var logLevel: Logger.Level = .info
    let label: String
    let write: @Sendable ([UInt8]) -> Void

    package init(
        label: String, metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider,
        write: @escaping @Sendable ([UInt8]) -> Void = { StageProcess.writeAll($0, to: 2) }
    ) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = write
    }

    package func log(event: LogEvent) {
        var all = metadata(of: event)
        if let error = event.error {
            all["error.message"] = "\(error)"
            all["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        var line = LocalTime.now()
        line += " \(event.level)"
        if !label.isEmpty { line += " " + label }
        line += ":"
        for (key, value) in all.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
        line += " [\(event.source)] \(event.message)\n"
        write(Array(line.utf8))
    }
}

/// What the stages' two handlers share: their metadata, and how a line's is put together.
protocol StageLogHandler: LogHandler {}

extension StageLogHandler {
    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The handler's metadata, then its provider's, then the line's own, each over the one before.
    func metadata(of event: LogEvent) -> Logger.Metadata {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, provided in provided } }
        if let explicit = event.metadata { all.merge(explicit) { _, explicit in explicit } }
        return all
    }
}

/// The local time to the second, as `StreamLogHandler` writes it (`%Y-%m-%dT%H:%M:%S%z`).
enum LocalTime {
    private static let last = Mutex<(second: time_t, text: String)>((-1, ""))

    static func now() -> String {
        var second = time(nil)
        if let text = last.withLock({ $0.second == second ? $0.text : nil }) { return text }
        var parts = tm()
        var buffer = [CChar](repeating: 0, count: 64)
        // localtime_r: unlike localtime, it does not read the time zone again on every call.
        guard localtime_r(&second, &parts) != nil, strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts) > 0 else { return "<unknown>" }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        last.withLock { $0 = (second, text) }
        return text
    }
}
