#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// RFC 3339 timestamps, computed without Foundation's formatters (they are slow and locale-bound).
public enum Timestamp {
    public static func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    public static func now() -> String { iso8601(milliseconds: nowMilliseconds()) }

    /// Milliseconds on a clock that never steps: the wall clock as this process first asked for
    /// it, plus the monotonic time since. Leases and redelivery are timed on it, so a step of the
    /// wall clock neither lapses every lease at once nor holds them forever, while the times it
    /// stamps stay close to the wall clock's.
    public static func steadyMilliseconds() -> Int64 {
        steadyAnchor.wall + monotonicMilliseconds() - steadyAnchor.monotonic
    }

    /// CLOCK_MONOTONIC in milliseconds: only differences mean anything.
    public static func monotonicMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    private static let steadyAnchor = (wall: nowMilliseconds(), monotonic: monotonicMilliseconds())

    /// `2026-11-21T05:00:00.123Z`
    public static func iso8601(milliseconds: Int64) -> String {
        let seconds = milliseconds.floorDivided(by: 1000)
        let millis = Int(milliseconds - seconds * 1000)
        let date = CivilDate(daysSinceEpoch: seconds.floorDivided(by: 86_400))
        let secondOfDay = Int(seconds - seconds.floorDivided(by: 86_400) * 86_400)
        guard (0...9999).contains(date.year) else {
            return "\(date.iso8601)T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(millis, 3))Z"
        }
        // Digits written in place: every outcome is stamped, and the interpolation of padded
        // parts would build a small string for each part each time.
        return String(unsafeUninitializedCapacity: 24) { out in
            func digits(_ value: Int, _ width: Int, at end: Int) {
                var value = value
                for index in stride(from: end - 1, through: end - width, by: -1) {
                    out[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            digits(date.year, 4, at: 4)
            digits(date.month, 2, at: 7)
            digits(date.day, 2, at: 10)
            digits(secondOfDay / 3600, 2, at: 13)
            digits(secondOfDay / 60 % 60, 2, at: 16)
            digits(secondOfDay % 60, 2, at: 19)
            digits(millis, 3, at: 23)
            (out[4], out[7], out[10], out[13], out[16], out[19], out[23]) =
                (UInt8(ascii: "-"), UInt8(ascii: "-"), UInt8(ascii: "T"), UInt8(ascii: ":"), UInt8(ascii: ":"), UInt8(ascii: "."), UInt8(ascii: "Z"))
            return 24
        }
    }

    /// The inverse of `iso8601(milliseconds:)`: exactly its form, `YYYY-MM-DDTHH:MM:SS.mmmZ`;
    /// nil for anything else.
    public static func milliseconds(iso8601 text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 24, bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            bytes[19] == UInt8(ascii: "."), bytes[23] == UInt8(ascii: "Z"), let date = CivilDate(iso8601: String(text.prefix(10)))
        else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for b in bytes[range] {
                guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(b - UInt8(ascii: "0"))
            }
            return value
        }
        guard let hour = number(11..<13), hour < 24, let minute = number(14..<16), minute < 60, let second = number(17..<19), second < 60,
            let millis = number(20..<23)
        else { return nil }
        return ((date.daysSinceEpoch * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
    }

    static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}

/// A proleptic Gregorian calendar date, with the day arithmetic providers' rules need
/// (Howard Hinnant's days-from-civil algorithms).
public struct CivilDate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let year: Int
    public let month: Int
    public let day: Int

    /// nil unless the date exists (2026-02-30 does not).
    public init?(year: Int, month: Int, day: Int) {
        guard (1...12).contains(month), day >= 1, day <= CivilDate.daysIn(year: year, month: month) else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// Parses `YYYY-MM-DD` strictly.
    public init?(iso8601 text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for b in bytes[range] {
                guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(b - UInt8(ascii: "0"))
            }
            return value
        }
        guard let y = number(0..<4), let m = number(5..<7), let d = number(8..<10) else { return nil }
        self.init(year: y, month: m, day: d)
    }

    public init(daysSinceEpoch: Int64) {
        let z = daysSinceEpoch + 719_468
        let era = z.floorDivided(by: 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        year = Int(yoe + era * 400 + (m <= 2 ? 1 : 0))
        month = Int(m)
        day = Int(d)
    }

    public var daysSinceEpoch: Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = y.floorDivided(by: 400)
        let yoe = y - era * 400
        let mp = Int64(month > 2 ? month - 3 : month + 9)
        let doy = (153 * mp + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public static func daysIn(year: Int, month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    public func addingDays(_ days: Int) -> CivilDate { CivilDate(daysSinceEpoch: daysSinceEpoch + Int64(days)) }

    /// Adds months, clamping the day to the target month's last day (Jan 31 + 1 month = Feb 28/29).
    public func addingMonths(_ months: Int) -> CivilDate {
        let index = year * 12 + (month - 1) + months
        let y = index.floorDivided(by: 12)
        let m = index - y * 12 + 1
        return CivilDate(year: y, month: m, day: min(day, CivilDate.daysIn(year: y, month: m)))!
    }

    public var iso8601: String { "\(Timestamp.pad(year, 4))-\(Timestamp.pad(month, 2))-\(Timestamp.pad(day, 2))" }
    public var description: String { iso8601 }

    public static func < (a: CivilDate, b: CivilDate) -> Bool { a.daysSinceEpoch < b.daysSinceEpoch }
}

extension BinaryInteger {
    func floorDivided(by divisor: Self) -> Self {
        let q = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? q - 1 : q
    }
}
