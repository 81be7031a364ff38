import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

@Suite struct TPScheduleTests {
    func date(_ text: String) -> CivilDate { CivilDate(iso8601: text)! }

    @Test func seedBeginDateExampleFirstPaymentOnTheEighth() {
        // Submitted 5 January 2018, 1 MONTH, begindate 2018-01-08: first on the 8th, then the 8th of each month.
        let schedule = TPSchedule(
            requestDate: date("2018-01-05"), beginDate: date("2018-01-08"), unit: .month, frequency: 1, number: 1, finalNumber: 4)
        #expect(schedule.automatedPaymentDates(limit: 10).map(\.iso8601) == ["2018-01-08", "2018-02-08", "2018-03-08"])
    }

    @Test func seedNoBeginDateExampleFirstPaymentOneMonthLaterOnTheFifth() {
        let schedule = TPSchedule(requestDate: date("2018-01-05"), beginDate: nil, unit: .month, frequency: 1, number: 1, finalNumber: 4)
        #expect(schedule.automatedPaymentDates(limit: 10).map(\.iso8601) == ["2018-02-05", "2018-03-05", "2018-04-05"])
    }

    @Test func seedTwelvePaymentsInTotalMeansElevenAutomated() {
        let schedule = TPSchedule(
            requestDate: date("2019-09-05"), beginDate: date("2020-01-01"), unit: .month, frequency: 1, number: 1, finalNumber: 12)
        #expect(schedule.automatedPaymentCount == 11)
        let dates = schedule.automatedPaymentDates(limit: 100)
        #expect(dates.count == 11)
        #expect(dates.first?.iso8601 == "2020-01-01")
        #expect(dates.last?.iso8601 == "2020-11-01")
    }

    @Test func resumedSubscriptionCountsFromNumber() {
        // Trust Payments' example: resuming after 3 payments with subscriptionnumber 4.
        let schedule = TPSchedule(requestDate: date("2018-01-05"), beginDate: nil, unit: .month, frequency: 1, number: 4, finalNumber: 12)
        #expect(schedule.automatedPaymentCount == 8)
    }

    @Test func seedFrequencyExamplesSevenDaysAndTwoMonths() {
        let weekly = TPSchedule(requestDate: date("2018-01-05"), beginDate: nil, unit: .day, frequency: 7, finalNumber: 4)
        #expect(weekly.automatedPaymentDates(limit: 10).map(\.iso8601) == ["2018-01-12", "2018-01-19", "2018-01-26"])
        let bimonthly = TPSchedule(requestDate: date("2018-01-05"), beginDate: nil, unit: .month, frequency: 2, finalNumber: 3)
        #expect(bimonthly.automatedPaymentDates(limit: 10).map(\.iso8601) == ["2018-03-05", "2018-05-05"])
    }

    @Test func monthEndClampsFromTheAnchorWithoutDrift() {
        let schedule = TPSchedule(requestDate: date("2024-01-31"), beginDate: nil, unit: .month, frequency: 1, finalNumber: 6)
        #expect(schedule.automatedPaymentDates(limit: 10).map(\.iso8601) == ["2024-02-29", "2024-03-31", "2024-04-30", "2024-05-31", "2024-06-30"])
        let begun = TPSchedule(requestDate: date("2023-01-01"), beginDate: date("2023-01-31"), unit: .month, frequency: 1, finalNumber: 4)
        #expect(begun.automatedPaymentDates(limit: 10).map(\.iso8601) == ["2023-01-31", "2023-02-28", "2023-03-31"])
    }

    @Test func indefiniteNeedsALimit() {
        let schedule = TPSchedule(requestDate: date("2018-01-05"), beginDate: nil, unit: .month, frequency: 1, finalNumber: 0)
        #expect(schedule.automatedPaymentCount == nil)
        #expect(schedule.automatedPaymentDates(limit: 5).count == 5)
        #expect(schedule.automatedPaymentDates(limit: 0).isEmpty)
    }

    @Test func finalNumberEqualToNumberMeansNoAutomatedPayment() {
        let schedule = TPSchedule(requestDate: date("2018-01-05"), beginDate: nil, unit: .month, frequency: 1, number: 1, finalNumber: 1)
        #expect(schedule.automatedPaymentDates(limit: 10).isEmpty)
    }

    @Test func freeTrialTakesNoUpFrontPayment() {
        let schedule = TPSchedule(
            requestDate: date("2018-01-05"), beginDate: nil, unit: .month, frequency: 1, finalNumber: 12, includesInitialPayment: false)
        #expect(schedule.automatedPaymentCount == 12)
    }

    @Test func hugeFrequenciesStopAtYear9999() {
        let schedule = TPSchedule(requestDate: date("2018-01-05"), beginDate: nil, unit: .day, frequency: 99_999_999_999, finalNumber: 0)
        #expect(schedule.automatedPaymentDates(limit: 3).isEmpty)
        let months = TPSchedule(requestDate: date("9999-11-05"), beginDate: nil, unit: .month, frequency: 1, finalNumber: 0)
        #expect(months.automatedPaymentDates(limit: 3).map(\.iso8601) == ["9999-12-05"])
    }

    @Test func fromARequest() throws {
        let request = try TPSubscriptionRequest(order: TPFixtures.order(TPFixtures.seedParams), issuedAt: TPFixtures.seedIssuedAt)
        let schedule = TPSchedule(request: request, issuedAt: TPFixtures.seedIssuedAt)
        #expect(schedule.requestDate.iso8601 == "2019-09-05")
        #expect(schedule.automatedPaymentDates(limit: 1).map(\.iso8601) == ["2020-01-01"])
    }
}
