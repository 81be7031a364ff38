import Foundation
import PaypipeCore
import Sandbox
import TrustPayments

/// Trust Payments' subscription engine, as the sandbox runs it on its own clock: every SDK
/// payment that scheduled a SUBSCRIPTION becomes a series whose automated payments the engine
/// takes when due (an AUTH with `accounttypedescription` RECUR, naming the first AUTH as
/// `parenttransactionreference`), each reported by URL notification: authorised (`settlestatus`
/// 0), then settled (100); or declined (`errorcode` 70000, `settlestatus` 3). The first AUTH's
/// own settlement is reported too. Notifications are posted with their fields in ASCII name
/// order and signed by the sandbox's own code (Trust Payments' URL notification documentation).
extension TrustPaymentsEmulator: SubscriptionEmulator {
    package struct Series: Sendable {
        var merchant: String
        var parent: String
        /// The SUBSCRIPTION's own transactionreference, which TRANSACTIONUPDATE names.
        var subscriptionReference = ""
        /// `transactionactive` as Trust Payments' subscription notes define it: "2" until the
        /// first AUTH settles, "1" active, "0" inactive (payments wait; re-enabled, the engine
        /// catches up the missed ones), "3" stopped permanently.
        var active = "2"
        var orderReference: String
        var amount: Int64
        var currency: String
        var unit: String
        var frequency: Int
        var number: Int64
        /// 0: no end.
        var finalNumber: Int64
        var nextDue: Int64
        var initialSettled = false
        var declineNext = false
        /// The next automated payment is taken but its notifications are not sent (a rule that
        /// sends none, or one lost after Trust Payments' retries); `resendLast` sends it late.
        var dropNext = false
        /// The last notification sent, for `resendLast` (Trust Payments retries offline
        /// notifications for about 48 hours).
        var lastNotification: [TPSandboxNotification.Field]?
    }

    /// The series an SDK payment's records start, if they scheduled a SUBSCRIPTION.
    package static func series(from records: [[String: JSONValue]], merchant: String, now: Int64) -> Series? {
        guard let subscription = records.first(where: { $0["requesttypedescription"]?.stringValue == "SUBSCRIPTION" }),
            subscription["errorcode"]?.stringValue == "0", let parent = subscription["parenttransactionreference"]?.stringValue,
            let subscriptionReference = subscription["transactionreference"]?.stringValue,
            let amount = subscription["baseamount"]?.stringValue.flatMap({ Int64($0) })
        else { return nil }
        let unit = subscription["subscriptionunit"]?.stringValue ?? "MONTH"
        let frequency = subscription["subscriptionfrequency"]?.stringValue.flatMap { Int($0) } ?? 1
        var series = Series(
            merchant: merchant, parent: parent, subscriptionReference: subscriptionReference,
            orderReference: subscription["orderreference"]?.stringValue ?? "", amount: amount,
            currency: subscription["currencyiso3a"]?.stringValue ?? "GBP", unit: unit, frequency: max(1, frequency),
            number: subscription["subscriptionnumber"]?.stringValue.flatMap { Int64($0) } ?? 1,
            finalNumber: subscription["subscriptionfinalnumber"]?.stringValue.flatMap { Int64($0) } ?? 0, nextDue: now)
        if let begin = subscription["subscriptionbegindate"]?.stringValue, let day = Self.day(begin), day > now {
            series.nextDue = day
        } else {
            series.nextDue = series.after(now)
        }
        return series
    }

    package static func day(_ text: String) -> Int64? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = text.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3, let date = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2])) else { return nil }
        return Int64(date.timeIntervalSince1970 * 1000)
    }

    package func advance(from: Int64, to: Int64, context: SandboxContext) async -> Int {
        var sent = 0
        for merchant in merchants {
            // Taken under the lock, sent outside it, in order.
            let notifications = merchant.store.withLock { store -> [[TPSandboxNotification.Field]] in
                var notifications: [[TPSandboxNotification.Field]] = []
                for parent in store.series.keys.sorted() {
                    guard var series = store.series[parent] else { continue }
                    let (sent, dropped) = Self.run(&series, until: to, siteReference: merchant.config.siteReference, store: &store)
                    if let last = sent.last ?? dropped { series.lastNotification = last }
                    notifications += sent
                    store.series[parent] = series
                }
                return notifications
            }
            for fields in notifications {
                await send(fields, merchant: merchant, context: context)
                sent += 1
            }
        }
        return sent
    }

    /// The notifications the engine sends for `series` up to `until`, its records kept for
    /// queries; and the last one it dropped (`dropNext`) after them, if any.
    package static func run(
        _ series: inout Series, until: Int64, siteReference: String, store: inout Store
    ) -> (sent: [[TPSandboxNotification.Field]], dropped: [TPSandboxNotification.Field]?) {
        var notifications: [[TPSandboxNotification.Field]] = []
        var dropped: [TPSandboxNotification.Field]?
        if !series.initialSettled {
            series.initialSettled = true
            store.records[series.parent]?["settlestatus"] = "100"
            notifications.append(
                fields(series, reference: series.parent, errorcode: "0", settleStatus: "100", recurring: false, siteReference: siteReference))
            // "Our subscription engine will not schedule payments unless the first payment (AUTH)
            // has been settled": settled, the SUBSCRIPTION is active unless updated meanwhile.
            if series.active == "2" { series.active = "1" }
            if var subscription = store.records[series.subscriptionReference], subscription["transactionactive"]?.stringValue == "2" {
                subscription["transactionactive"] = .string(series.active)
                store.upsert(subscription)
            }
        }
        // Inactive ("0") or stopped ("3"): no payment is taken; an inactive series' missed
        // payments are taken once it is active again.
        while series.active == "1", series.nextDue <= until, series.finalNumber == 0 || series.number < series.finalNumber {
            series.number += 1
            let reference = TPSandbox.transactionReference(seed: "\(series.parent)\u{0}\(series.number)")
            let declined = series.declineNext
            series.declineNext = false
            let payment: [[TPSandboxNotification.Field]] =
                declined
                ? [
                    fields(
                        series, reference: reference, errorcode: TPErrorCode.declined, settleStatus: "3", recurring: true,
                        siteReference: siteReference)
                ]
                : [
                    fields(series, reference: reference, errorcode: "0", settleStatus: "0", recurring: true, siteReference: siteReference),
                    fields(series, reference: reference, errorcode: "0", settleStatus: "100", recurring: true, siteReference: siteReference),
                ]
            if series.dropNext {
                series.dropNext = false
                dropped = payment.last
            } else {
                notifications += payment
            }
            // As a TRANSACTIONQUERY shows it, in its current state: the engine's AUTH carries the
            // first AUTH's orderreference over, so a query by it finds the series.
            store.upsert([
                "transactionreference": .string(reference), "parenttransactionreference": .string(series.parent),
                "requesttypedescription": "AUTH", "accounttypedescription": "RECUR", "sitereference": .string(siteReference),
                "orderreference": .string(series.orderReference), "baseamount": .string(String(series.amount)),
                "currencyiso3a": .string(series.currency), "subscriptionnumber": .string(String(series.number)),
                "errorcode": .string(declined ? TPErrorCode.declined : "0"), "settlestatus": .string(declined ? "3" : "100"),
                "transactionstartedtimestamp": .string(TPSandbox.timestamp(milliseconds: series.nextDue)),
            ])
            series.nextDue = series.after(series.nextDue)
        }
        return (notifications, dropped)
    }

    package static func fields(
        _ series: Series, reference: String, errorcode: String, settleStatus: String, recurring: Bool, siteReference: String
    ) -> [TPSandboxNotification.Field] {
        var fields: [TPSandboxNotification.Field] = [
            ("baseamount", String(series.amount)), ("currencyiso3a", series.currency), ("errorcode", errorcode),
            ("orderreference", series.orderReference), ("requesttypedescription", "AUTH"), ("settlestatus", settleStatus),
            ("sitereference", siteReference), ("transactionreference", reference),
        ]
        if recurring {
            fields += [
                ("accounttypedescription", "RECUR"), ("parenttransactionreference", series.parent), ("subscriptionnumber", String(series.number)),
            ]
        }
        // Trust Payments posts the fields in ASCII name order (its own plugin depends on it).
        fields.sort { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
        fields.append(("notificationreference", "N" + String(Digest.sha256Hex(Array("\(reference)|\(settleStatus)|\(errorcode)".utf8)).prefix(10))))
        return fields
    }

    package func send(_ fields: [TPSandboxNotification.Field], merchant: Merchant, context: SandboxContext) async {
        let body = TPSandboxNotification.formBody(fields: fields, password: merchant.config.notificationPassword)
        let request = HTTPRequestSpec(
            method: .POST, url: notificationURL(context: context),
            headers: [HTTPHeader("Content-Type", "application/x-www-form-urlencoded; charset=UTF-8")], body: body)
        await context.outbound.deliver(request, label: "trustpayments notification")
    }

    /// Where URL notifications go: the `trustpayments.notificationURL` option, or the pipeline's
    /// callback validator as the config names it.
    package func notificationURL(context: SandboxContext) -> String {
        if let url = context.option(.trustpayments, "notificationURL") { return url }
        let address = callbacksAddress.replacingOccurrences(of: "0.0.0.0:", with: "127.0.0.1:")
        return "http://\(address)/callbacks/trustpayments/notification"
    }

    /// Body `{"subscription": <the first AUTH's transactionreference>}`:
    /// - `declineNext`: the series' next automated payment is declined;
    /// - `dropNext`: the series' next automated payment is taken but not notified;
    /// - `resendLast`: its last notification (or the dropped one, if later) is sent again, as
    ///   Trust Payments retries one.
    /// - `pay` `{"jwt": <the SDK JWT>}`: the customer pays in the app, as `POST /sdk/payment`,
    ///   and Trust Payments posts the payment's URL notification itself; answers the first AUTH's
    ///   transactionreference as `subscription` and the response JWT.
    package func act(_ action: String, body: JSONValue, context: SandboxContext) async -> HTTPResponseSpec {
        if action == "pay" { return await pay(body, context: context) }
        guard ["declineNext", "dropNext", "resendLast"].contains(action) else {
            return SandboxContext.json(404, ["error": "trustpayments actions: pay, declineNext, dropNext, resendLast"])
        }
        guard let parent = body["subscription"]?.stringValue else { return SandboxContext.json(400, ["error": "subscription is required"]) }
        for merchant in merchants {
            let found = merchant.store.withLock { store -> (Bool, [TPSandboxNotification.Field]?) in
                guard store.series[parent] != nil else { return (false, nil) }
                if action == "declineNext" { store.series[parent]?.declineNext = true }
                if action == "dropNext" { store.series[parent]?.dropNext = true }
                return (true, store.series[parent]?.lastNotification)
            }
            guard found.0 else { continue }
            if action == "resendLast" {
                guard let last = found.1 else { return SandboxContext.json(404, ["error": "nothing sent yet"]) }
                await send(last, merchant: merchant, context: context)
            }
            return SandboxContext.json(200, ["subscription": .string(parent), "action": .string(action)])
        }
        return SandboxContext.json(404, ["error": "no such subscription"])
    }
}

extension TrustPaymentsEmulator {
    package func pay(_ body: JSONValue, context: SandboxContext) async -> HTTPResponseSpec {
        let request = HTTPRequestSpec(method: .POST, url: Self.sdkPaymentPath, body: body.bytes)
        let paid = sdkPayment(request, ledger: context.ledger, now: context.clock.nowMilliseconds)
        guard paid.status == 200, let answer = try? JSONValue.parse(paid.body), let form = answer["notification"]?.stringValue else { return paid }
        let notification = HTTPRequestSpec(
            method: .POST, url: notificationURL(context: context),
            headers: [HTTPHeader("Content-Type", "application/x-www-form-urlencoded; charset=UTF-8")], body: Array(form.utf8))
        await context.outbound.deliver(notification, label: "trustpayments notification")
        // The sandbox's own form reading: it shares no callback code with the pipeline.
        let reference = SandboxContext.queryParameters(form)["transactionreference"] ?? ""
        return SandboxContext.json(200, ["subscription": .string(reference), "jwt": answer["jwt"] ?? .null])
    }
}

extension TrustPaymentsEmulator.Series {
    /// A TRANSACTIONUPDATE of the SUBSCRIPTION, which the sandbox has already accepted
    /// (`TPSandbox.update`): the engine follows the new values from its next run.
    package mutating func apply(_ updates: [String: String]) {
        if let active = updates["transactionactive"] { self.active = active }
        if let final = updates["subscriptionfinalnumber"].flatMap({ Int64($0) }) { finalNumber = final }
        if let amount = updates["baseamount"].flatMap({ Int64($0) }) { self.amount = amount }
        if let unit = updates["subscriptionunit"] { self.unit = unit }
        if let frequency = updates["subscriptionfrequency"].flatMap({ Int($0) }) { self.frequency = max(1, frequency) }
    }

    /// The due date one period after `instant`.
    package func after(_ instant: Int64) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let date = Date(timeIntervalSince1970: Double(instant) / 1000)
        let next = calendar.date(byAdding: unit == "DAY" ? .day : .month, value: frequency, to: date) ?? date.addingTimeInterval(86_400)
        return Int64(next.timeIntervalSince1970 * 1000)
    }
}
