import PaypipeCore

/// A subscription end date as Nets wants it on the wire: `yyyy-MM-dd'T'HH:mm:ss±hh:mm`,
/// e.g. `2019-07-18T00:00:00+01:00` (Nets Easy's subscription documentation).
///
/// The local wall time and the offset are kept exactly as given, so the merchant's "end of day in
/// my timezone" survives. Formatting is done by hand: the `DateFormatter` extension of Nets' iOS
/// sample computes the sign from `seconds / 3600`, which is 0 for offsets between -01:00 and 00:00
/// (so -00:30 comes out as "+00:30") and it drops sub-minute offsets; here the sign comes from the
/// offset itself.
public struct NetsEndDate: Sendable, Hashable, CustomStringConvertible {
    public let date: CivilDate
    public let hour: Int
    public let minute: Int
    public let second: Int
    /// Minutes east of UTC; -210 is -03:30.
    public let offsetMinutes: Int

    /// The widest offset accepted (ISO 8601 allows more in theory; no zone uses more than ±14:00).
    public static let maxOffsetMinutes = 18 * 60

    /// Builds from parts; nil unless every part is in range.
    public init?(date: CivilDate, hour: Int, minute: Int, second: Int, offsetMinutes: Int) {
        guard (0...23).contains(hour), (0...59).contains(minute), (0...59).contains(second),
            abs(offsetMinutes) <= NetsEndDate.maxOffsetMinutes, (1...9999).contains(date.year)
        else { return nil }
        self.date = date
        self.hour = hour
        self.minute = minute
        self.second = second
        self.offsetMinutes = offsetMinutes
    }

    /// The wall time at `offsetMinutes` of an instant; nil when the offset is out of range or
    /// the local year falls outside 0001...9999.
    public init?(epochSeconds: Int64, offsetMinutes: Int) {
        guard abs(offsetMinutes) <= NetsEndDate.maxOffsetMinutes else { return nil }
        let (local, overflow) = epochSeconds.addingReportingOverflow(Int64(offsetMinutes) * 60)
        guard !overflow, abs(local) < 400_000 * 366 * 86_400 else { return nil }
        let days = NetsEndDate.floorDivide(local, 86_400)
        let secondOfDay = Int(local - days * 86_400)
        self.init(
            date: CivilDate(daysSinceEpoch: days), hour: secondOfDay / 3600, minute: secondOfDay / 60 % 60,
            second: secondOfDay % 60, offsetMinutes: offsetMinutes)
    }

    /// Parses ISO 8601 / RFC 3339 date-times that carry an offset:
    /// `2030-07-18T00:00:00Z`, `...+01:00`, `...-03:30`, `...+0130`, with optional fractional
    /// seconds (`...:00.123+02:00`). Fractions are dropped: the wire format has none.
    /// A time without an offset is refused: its instant would depend on the server's zone.
    public init?(iso8601 text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 64 else { return nil }
        func digits(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= bytes.count else { return nil }
            var value = 0
            for b in bytes[start..<(start + count)] {
                guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(b - UInt8(ascii: "0"))
            }
            return value
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let year = digits(0, 4), let month = digits(5, 2), let day = digits(8, 2),
            let hour = digits(11, 2), let minute = digits(14, 2), let second = digits(17, 2),
            let date = CivilDate(year: year, month: month, day: day)
        else { return nil }

        var index = 19
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            let fractionStart = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
            guard index > fractionStart, index - fractionStart <= 9 else { return nil }
        }
        guard index < bytes.count else { return nil }

        let offset: Int
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == bytes.count else { return nil }
            offset = 0
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            let rest = bytes.count - index - 1
            guard let offsetHours = digits(index + 1, 2) else { return nil }
            let offsetMinutePart: Int?
            if rest == 5, bytes[index + 3] == UInt8(ascii: ":") {
                offsetMinutePart = digits(index + 4, 2)
            } else if rest == 4 {
                offsetMinutePart = digits(index + 3, 2)
            } else {
                offsetMinutePart = nil
            }
            guard let offsetMinutePart, offsetHours <= 18, offsetMinutePart <= 59 else { return nil }
            offset = sign * (offsetHours * 60 + offsetMinutePart)
        default:
            return nil
        }
        self.init(date: date, hour: hour, minute: minute, second: second, offsetMinutes: offset)
    }

    /// The instant, in seconds since 1970-01-01T00:00:00Z.
    public var epochSeconds: Int64 {
        date.daysSinceEpoch * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes) * 60
    }

    /// `yyyy-MM-dd'T'HH:mm:ss±hh:mm`, the only form Nets accepts.
    public var formatted: String {
        var out: [UInt8] = []
        out.reserveCapacity(25)
        func append(_ value: Int, width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        append(date.year, width: 4)
        out.append(UInt8(ascii: "-"))
        append(date.month, width: 2)
        out.append(UInt8(ascii: "-"))
        append(date.day, width: 2)
        out.append(UInt8(ascii: "T"))
        append(hour, width: 2)
        out.append(UInt8(ascii: ":"))
        append(minute, width: 2)
        out.append(UInt8(ascii: ":"))
        append(second, width: 2)
        out.append(offsetMinutes < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
        append(abs(offsetMinutes) / 60, width: 2)
        out.append(UInt8(ascii: ":"))
        append(abs(offsetMinutes) % 60, width: 2)
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { formatted }

    /// Formats an instant at an offset; nil when the inputs are out of range.
    public static func format(epochSeconds: Int64, offsetMinutes: Int) -> String? {
        NetsEndDate(epochSeconds: epochSeconds, offsetMinutes: offsetMinutes)?.formatted
    }

    /// Whether `text` is exactly the wire form (what the sandbox insists on, like Nets).
    public static func isWireFormatted(_ text: String) -> Bool {
        guard text.utf8.count == 25, let parsed = NetsEndDate(iso8601: text) else { return false }
        return parsed.formatted == text
    }

    /// Nets refuses an end date that is not in the future; the instant is
    /// compared, not the wall time, so 10:00+02:00 and 08:00Z are the same moment.
    public func isAfter(epochSeconds now: Int64) -> Bool { epochSeconds > now }

    static func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        let quotient = value / divisor
        return (value % divisor != 0 && value < 0) ? quotient - 1 : quotient
    }
}
