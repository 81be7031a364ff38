import PaypipeCore
import Testing
import TrustPaymentsTesting

@testable import TrustPayments

@Suite struct TPSubscriptionRequestTests {
    func parse(_ params: [String: JSONValue], amount: Int64? = 1050, currency: String? = "GBP") throws(Rejection) -> TPSubscriptionRequest {
        try TPSubscriptionRequest(order: TPFixtures.order(params, amount: amount, currency: currency), issuedAt: TPFixtures.seedIssuedAt)
    }

    func rejection(_ params: [String: JSONValue], amount: Int64? = 1050, currency: String? = "GBP") -> Rejection? {
        do {
            _ = try parse(params, amount: amount, currency: currency)
            return nil
        } catch {
            return error
        }
    }

    func with(_ key: String, _ value: JSONValue?) -> [String: JSONValue] {
        var params = TPFixtures.seedParams
        params[key] = value
        return params
    }

    @Test func seedExampleParses() throws {
        let request = try parse(TPFixtures.seedParams)
        #expect(request.baseAmount == 1050)
        #expect(request.type == .recurring)
        #expect(request.unit == .month)
        #expect(request.frequency == 1)
        #expect(request.number == 1)
        #expect(request.finalNumber == 12)
        #expect(request.beginDate == CivilDate(year: 2020, month: 1, day: 1))
        #expect(request.orderReference == "ord-000123")
        #expect(request.requestTypes == ["THREEDQUERY", "AUTH", "SUBSCRIPTION"])
    }

    @Test func numberDefaultsToOneAndStringsOfDigitsAreAccepted() throws {
        let request = try parse(with("number", nil).merging(["frequency": "2", "finalNumber": "0"]) { $1 })
        #expect(request.number == 1)
        #expect(request.frequency == 2)
        #expect(request.isIndefinite)
    }

    @Test func amountMustBePositiveAndAtMostThirteenDigits() {
        #expect(rejection(TPFixtures.seedParams, amount: 0)?.field == "amount")
        #expect(rejection(TPFixtures.seedParams, amount: 10_000_000_000_000)?.field == "amount")
        #expect(rejection(TPFixtures.seedParams, amount: 9_999_999_999_999) == nil)
        #expect(rejection(TPFixtures.seedParams, amount: nil)?.field == "amount")
        #expect(rejection(TPFixtures.seedParams, currency: "gbp")?.field == "currency")
    }

    @Test func subscriptionTypeIsRecurringOrInstallment() throws {
        #expect(try parse(with("subscriptionType", "INSTALLMENT")).type == .installment)
        #expect(rejection(with("subscriptionType", "MONTHLY"))?.field == "params.subscriptionType")
        #expect(rejection(with("subscriptionType", nil))?.code == .missingParam)
        #expect(rejection(with("subscriptionType", 1))?.field == "params.subscriptionType")
    }

    @Test func unitIsDayOrMonthAcceptingLowercase() throws {
        #expect(try parse(with("unit", "day")).unit == .day)
        #expect(try parse(with("unit", "Month")).unit == .month)
        let bad = rejection(with("unit", "WEEK"))
        #expect(bad?.field == "params.unit")
        #expect(bad?.message.contains("DAY or MONTH") == true)
        #expect(rejection(with("unit", nil))?.field == "params.unit")
    }

    @Test func frequencyIsAtLeastOne() throws {
        #expect(try parse(with("frequency", 7)).frequency == 7)
        #expect(rejection(with("frequency", 0))?.field == "params.frequency")
        #expect(rejection(with("frequency", -1))?.field == "params.frequency")
        #expect(rejection(with("frequency", .fraction(1.5)))?.field == "params.frequency")
        #expect(rejection(with("frequency", 100_000_000_000))?.field == "params.frequency")
        #expect(rejection(with("frequency", nil))?.code == .missingParam)
    }

    @Test func numberIsAtLeastOneAndFinalNumberAtLeastNumberOrZero() throws {
        #expect(try parse(with("number", 4)).number == 4)
        #expect(rejection(with("number", 0))?.field == "params.number")
        #expect(rejection(with("number", 100_000))?.field == "params.number")
        #expect(try parse(with("finalNumber", 0)).finalNumber == 0)
        #expect(try parse(with("finalNumber", 1)).finalNumber == 1)
        var resumed = with("number", 4)
        resumed["finalNumber"] = 3
        #expect(rejection(resumed)?.field == "params.finalNumber")
        resumed["finalNumber"] = 4
        #expect(rejection(resumed) == nil)
        #expect(rejection(with("finalNumber", nil))?.code == .missingParam)
        #expect(rejection(with("finalNumber", "12a"))?.field == "params.finalNumber")
    }

    @Test func beginDateIsARealDateNotInThePast() throws {
        #expect(try parse(with("beginDate", "2019-09-05")).beginDate == CivilDate(year: 2019, month: 9, day: 5))
        #expect(rejection(with("beginDate", "2020-02-30"))?.field == "params.beginDate")
        #expect(rejection(with("beginDate", "2020-1-01"))?.field == "params.beginDate")
        #expect(rejection(with("beginDate", 20200101))?.message == "params.beginDate must be a string, got an integer")
        let past = rejection(with("beginDate", "2019-09-04"))
        #expect(past?.field == "params.beginDate")
        #expect(past?.message.contains("before the request date") == true)
    }

    @Test func transactionActiveIsZeroOneOrTwo() throws {
        #expect(try parse(with("transactionActive", 1)).transactionActive == 1)
        #expect(try parse(with("transactionActive", "2")).transactionActive == 2)
        #expect(rejection(with("transactionActive", 3))?.field == "params.transactionActive")
    }

    @Test func freeTrialIsABoolean() throws {
        #expect(try parse(with("freeTrial", true)).requestTypes == ["ACCOUNTCHECK", "SUBSCRIPTION"])
        #expect(rejection(with("freeTrial", "yes"))?.field == "params.freeTrial")
    }

    @Test func unknownParamsAreUnknownFields() {
        let bad = rejection(with("begindate", "2020-01-01"))
        #expect(bad?.field == "params.begindate")
        // The shared vocabulary: an unknown parameter is UNKNOWN_FIELD.
        #expect(bad?.code == .unknownField)
        #expect(
            bad?.message
                == "params.begindate is not a parameter of trustpayments subscriptionJwt (allowed: beginDate, finalNumber, freeTrial, frequency, number, subscriptionType, transactionActive, unit)"
        )
    }

    @Test func nullIsAWrongTypeNotAnAbsentParam() {
        #expect(rejection(with("number", .null))?.message == "params.number must be an integer or a string of digits, got null")
        #expect(rejection(with("beginDate", .null))?.message == "params.beginDate must be a string, got null")
        #expect(rejection(with("freeTrial", .null))?.message == "params.freeTrial must be a boolean, got null")
        #expect(rejection(with("subscriptionType", .null))?.message == "params.subscriptionType must be a string, got null")
        for key in ["number", "beginDate", "freeTrial", "transactionActive", "unit"] {
            #expect(rejection(with(key, .null))?.code == .invalidParam, "\(key)")
        }
    }

    @Test func otherOperationsAreRefused() {
        let order = Order(orderId: "o1", operation: .transactionQuery, params: ["transactionReference": "1-2-3"])
        #expect(throws: Rejection.self) { try TPSubscriptionRequest(order: order, issuedAt: 0) }
    }

    @Test func signerRejectsInsteadOfSigning() {
        let signer = TPJWTSigner(config: TPFixtures.config)
        #expect(throws: Rejection.self) { try signer.sign(order: TPFixtures.order(with("unit", "YEAR")), issuedAt: 0) }
    }
}
