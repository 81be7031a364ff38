import Foundation
import NetsEasy
import PaypipeCore
import Testing

@Suite struct NetsEndDateTests {
    @Test func seedExampleRoundTrips() throws {
        let date = try #require(NetsEndDate(iso8601: "2019-07-18T00:00:00+01:00"))
        #expect(date.formatted == "2019-07-18T00:00:00+01:00")
        #expect(date.offsetMinutes == 60)
        #expect(date.epochSeconds == 1_563_404_400)  // 2019-07-17T23:00:00Z
    }

    @Test(arguments: [
        ("2030-01-01T00:00:00Z", "2030-01-01T00:00:00+00:00", Int64(1_893_456_000)),
        ("2030-01-01t00:00:00z", "2030-01-01T00:00:00+00:00", Int64(1_893_456_000)),
        ("2030-01-01T00:00:00.123456-03:30", "2030-01-01T00:00:00-03:30", Int64(1_893_456_000 + 12_600)),
        ("2030-01-01T05:30:00+0530", "2030-01-01T05:30:00+05:30", Int64(1_893_456_000)),
        ("2030-01-01T00:00:00-0930", "2030-01-01T00:00:00-09:30", Int64(1_893_456_000 + 34_200)),
        ("2030-01-01T00:00:00-00:30", "2030-01-01T00:00:00-00:30", Int64(1_893_456_000 + 1_800)),
        ("2030-01-01T00:00:00-00:00", "2030-01-01T00:00:00+00:00", Int64(1_893_456_000)),
        ("2028-02-29T23:59:59+14:00", "2028-02-29T23:59:59+14:00", Int64(1_835_481_599) - 50_400),
    ])
    func parsesOffsetsAndKeepsWallTime(input: String, wire: String, epoch: Int64) throws {
        let date = try #require(NetsEndDate(iso8601: input))
        #expect(date.formatted == wire)
        #expect(date.epochSeconds == epoch)
        #expect(NetsEndDate.isWireFormatted(wire))
    }

    @Test(arguments: [
        "", "2030-01-01", "2030-01-01T00:00:00", "2030-01-01 00:00:00Z", "2030-13-01T00:00:00Z", "2030-02-30T00:00:00Z",
        "2030-01-01T24:00:00Z", "2030-01-01T00:60:00Z", "2030-01-01T00:00:60Z", "2030-01-01T00:00:00+19:00",
        "2030-01-01T00:00:00+05:3", "2030-01-01T00:00:00+05:60", "2030-01-01T00:00:00Zjunk", "2030-01-01T00:00:00.Z",
        "2030-01-01T00:00:00.1234567890Z", "+2030-01-01T00:00:00Z", "2030-01-01T00:00:00+05", "２030-01-01T00:00:00Z",
    ])
    func refusesMalformed(input: String) {
        #expect(NetsEndDate(iso8601: input) == nil)
    }

    /// The formatter of Nets' iOS sample builds the sign from `seconds / 3600`: -03:30 and -09:30
    /// survive that, -00:30 does not. All three come out right here.
    @Test(arguments: [
        (Int64(1_893_456_000), -210, "2029-12-31T20:30:00-03:30"),
        (Int64(0), -570, "1969-12-31T14:30:00-09:30"),
        (Int64(0), -30, "1969-12-31T23:30:00-00:30"),
        (Int64(1_893_456_000), 345, "2030-01-01T05:45:00+05:45"),
        (Int64(1_563_404_400), 60, "2019-07-18T00:00:00+01:00"),
        (Int64(-1), 0, "1969-12-31T23:59:59+00:00"),
    ])
    func formatsInstantAtOffset(epoch: Int64, offset: Int, expected: String) {
        #expect(NetsEndDate.format(epochSeconds: epoch, offsetMinutes: offset) == expected)
    }

    @Test func refusesOutOfRangeOffsetsAndYears() {
        #expect(NetsEndDate.format(epochSeconds: 0, offsetMinutes: 18 * 60 + 1) == nil)
        #expect(NetsEndDate.format(epochSeconds: 0, offsetMinutes: -18 * 60 - 1) == nil)
        #expect(NetsEndDate.format(epochSeconds: 253_402_300_800, offsetMinutes: 0) == nil)  // year 10000
        #expect(NetsEndDate.format(epochSeconds: Int64.max, offsetMinutes: 60) == nil)
        #expect(NetsEndDate.isWireFormatted("2030-01-01T00:00:00Z") == false)
    }

    /// Cross-check against Foundation for many instants and awkward offsets.
    @Test func agreesWithFoundation() throws {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.calendar = Calendar(identifier: .gregorian)
        formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
        var generator = SystemRandomNumberGenerator()
        for offset in [-720, -570, -210, -30, 0, 30, 330, 345, 525, 765, 840] {
            formatter.timeZone = TimeZone(secondsFromGMT: offset * 60)
            let sign = offset < 0 ? "-" : "+"
            let suffix = sign + String(format: "%02d:%02d", abs(offset) / 60, abs(offset) % 60)
            for _ in 0..<200 {
                let epoch = Int64.random(in: -2_000_000_000...4_000_000_000, using: &generator)
                let expected = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(epoch))) + suffix
                let formatted = try #require(NetsEndDate.format(epochSeconds: epoch, offsetMinutes: offset))
                #expect(formatted == expected)
                #expect(NetsEndDate(iso8601: formatted)?.epochSeconds == epoch)
            }
        }
    }

    @Test func futureRuleComparesInstants() throws {
        let date = try #require(NetsEndDate(iso8601: "2030-01-01T02:00:00+02:00"))
        #expect(date.isAfter(epochSeconds: 1_893_456_000 - 1))
        #expect(!date.isAfter(epochSeconds: 1_893_456_000))
    }
}
