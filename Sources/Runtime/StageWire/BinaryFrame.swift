import PaypipeCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Length-prefixed fields for frames that only paypipe's own stages write and read. A frame
/// starts with a tag byte that JSON text cannot start with, so a reader can tell it from the
/// JSON frame of an earlier release. Integers are little-endian; every variable-length field is
/// a 32-bit length and its bytes, so bodies travel as they are, without Base64 or escaping.
struct BinaryFrameWriter {
    private(set) var bytes: [UInt8]

    init(tag: UInt8, capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(tag)
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func integer(_ value: Int64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func count(_ value: Int) {
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func field(_ value: some Collection<UInt8>) {
        count(value.count)
        bytes.append(contentsOf: value)
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            count(utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    /// The optional last field of every frame: the W3C `traceparent` of the span that sent it
    /// (`StageTracing`), written only while tracing is on, so a frame without it is as before.
    mutating func trace(_ traceparent: String?) {
        if let traceparent { string(traceparent) }
    }

    /// `frame` with a trace field appended: for a frame that was written without one.
    static func appendingTrace(_ traceparent: String, to frame: [UInt8]) -> [UInt8] {
        var writer = BinaryFrameWriter(frame: frame, extra: 4 + traceparent.utf8.count)
        writer.string(traceparent)
        return writer.bytes
    }

    private init(frame: [UInt8], extra: Int) {
        bytes = frame
        bytes.reserveCapacity(frame.count + extra)
    }

    /// A field whose bytes `write` appends in place; its length is filled in afterwards.
    mutating func field(_ write: (inout [UInt8]) -> Void) {
        let start = bytes.count
        count(0)
        write(&bytes)
        let length = UInt32(truncatingIfNeeded: bytes.count - start - 4).littleEndian
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: length, toByteOffset: start, as: UInt32.self) }
    }
}

/// Reads what `BinaryFrameWriter` wrote. Every read names the field it was for, so a truncated
/// or corrupt frame is refused with the field's name, never with its contents.
struct BinaryFrameReader {
    private let frame: [UInt8]
    private var offset: Int
    private let label: String

    /// `label` prefixes the field names in errors (e.g. "work").
    init(_ frame: [UInt8], tag: UInt8, label: String) throws(EnvelopeError) {
        guard frame.first == tag else { throw EnvelopeError("\(label) is not a binary frame") }
        self.frame = frame
        offset = 1
        self.label = label
    }

    private mutating func take(_ count: Int, _ field: StaticString) throws(EnvelopeError) -> Range<Int> {
        guard count >= 0, frame.count - offset >= count else { throw EnvelopeError("\(label).\(field) is truncated") }
        defer { offset += count }
        return offset..<offset + count
    }

    mutating func byte(_ field: StaticString) throws(EnvelopeError) -> UInt8 {
        frame[try take(1, field).lowerBound]
    }

    mutating func integer(_ field: StaticString) throws(EnvelopeError) -> Int64 {
        Int64(littleEndian: load(try take(8, field), as: Int64.self))
    }

    mutating func count(_ field: StaticString) throws(EnvelopeError) -> Int {
        Int(UInt32(littleEndian: load(try take(4, field), as: UInt32.self)))
    }

    private func load<T: FixedWidthInteger>(_ range: Range<Int>, as: T.Type) -> T {
        frame.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: range.lowerBound, as: T.self) }
    }

    mutating func field(_ name: StaticString) throws(EnvelopeError) -> ArraySlice<UInt8> {
        frame[try take(try count(name), name)]
    }

    /// A field that must be valid UTF-8. Decoding repairs invalid bytes, so the text is valid
    /// exactly when it has the field's own bytes (faster than the stdlib's validating init).
    mutating func string(_ name: StaticString) throws(EnvelopeError) -> String {
        let range = try take(try count(name), name)
        return try frame.withUnsafeBufferPointer { (buffer) throws(EnvelopeError) -> String in
            let bytes = UnsafeBufferPointer(rebasing: buffer[range])
            var text = String(decoding: bytes, as: UTF8.self)
            guard text.withUTF8({ $0.count == bytes.count && (bytes.isEmpty || memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0) })
            else { throw EnvelopeError("\(label).\(name) is not UTF-8") }
            return text
        }
    }

    /// A field that must hold one JSON value.
    mutating func json(_ name: StaticString) throws(EnvelopeError) -> JSONValue {
        guard let value = try? JSONValue.parse(try field(name)) else { throw EnvelopeError("\(label).\(name) is not JSON") }
        return value
    }

    /// The trace field when the frame has one left (`BinaryFrameWriter.trace`); a traceparent
    /// is short printable ASCII, and anything else there is refused.
    mutating func trace() throws(EnvelopeError) -> String? {
        guard offset < frame.count else { return nil }
        let value = try string("trace")
        guard value.utf8.count <= 512, value.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw EnvelopeError("\(label).trace is not a traceparent")
        }
        return value
    }

    /// The frame must end here: trailing bytes mean a writer this reader does not know.
    func end() throws(EnvelopeError) {
        guard offset == frame.count else { throw EnvelopeError("\(label) has \(frame.count - offset) bytes past its last field") }
    }
}

extension BinaryFrameReader {
    /// What every work or dispatch frame begins with: acceptedAt, generation, token and
    /// purpose, then the order's bytes, whatever the fields hold; nil when the frame is too short
    /// to hold them.
    static func head(of frame: [UInt8], tag: UInt8) -> (generation: Int64, token: UInt64, purpose: ArraySlice<UInt8>, order: ArraySlice<UInt8>)? {
        guard var reader = try? BinaryFrameReader(frame, tag: tag, label: "frame"), (try? reader.integer("acceptedAt")) != nil,
            let generation = try? reader.integer("generation"), let token = try? reader.integer("token"),
            let purpose = try? reader.field("purpose"), let order = try? reader.field("order")
        else { return nil }
        return (generation, UInt64(bitPattern: token), purpose, order)
    }

    static func order(in frame: [UInt8], tag: UInt8) -> ArraySlice<UInt8>? { head(of: frame, tag: tag)?.order }
}
