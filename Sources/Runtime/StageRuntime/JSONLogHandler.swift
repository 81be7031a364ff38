import Logging
import PaypipeCore

/// One JSON object per log line on stderr (`--log-format json`, `PAYPIPE_LOG_FORMAT=json`), for
/// a log pipeline that indexes fields: `time`, `level`, `stage` (the logger's label), `event`
/// (the message), then every metadata key (`merchant`, `orderId`, `provider`, `operation`,
/// `generation`, …) as a string member. Nothing a stage logs carries a secret; this handler adds
/// nothing of its own beyond the time.
package struct JSONLogHandler: StageLogHandler {
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    package var logLevel: Logger.Level = .info
    let label: String
    let write: @Sendable ([UInt8]) -> Void

    package init(label: String, write: @escaping @Sendable ([UInt8]) -> Void = { StageProcess.writeAll($0, to: 2) }) {
        self.label = label
        self.write = write
    }

    package func log(event: LogEvent) {
        var fields: [String: JSONValue] = [:]
        for (key, value) in metadata(of: event) { fields[key] = .string(Self.text(value)) }
        fields["time"] = .string(Timestamp.now())
        fields["level"] = .string(event.level.rawValue)
        fields["stage"] = .string(label)
        fields["event"] = .string(event.message.description)
        write(JSONValue.object(fields).bytes + [UInt8(ascii: "\n")])
    }

    static func text(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): text
        case .stringConvertible(let value): value.description
        case .array(let items): "[" + items.map(text).joined(separator: ", ") + "]"
        case .dictionary(let entries): "{" + entries.sorted { $0.key < $1.key }.map { "\($0.key): \(text($0.value))" }.joined(separator: ", ") + "}"
        }
    }
}
