import NetsEasy
import PaypipeCore
import Sandbox

extension NetsSandbox {
    /// Nets' validation errors: `{"errors": {"field.path": ["message", ...]}}`.
    package struct ValidationErrors {
        var fields: [String: [String]] = [:]
        var isEmpty: Bool { fields.isEmpty }
        mutating func add(_ field: String, _ message: String) { fields[field, default: []].append(message) }

        var response: HTTPResponseSpec {
            let errors = JSONValue.object(fields.mapValues { .array($0.map(JSONValue.string)) })
            return NetsSandbox.json(400, ["errors": errors])
        }
    }

    /// What Nets would answer before looking at any stored state: 401 for a wrong key, 404
    /// for an unknown route, 415 for a non-JSON POST, 400 for header or body problems; nil
    /// when the request is acceptable. Stateless, so a sandbox can run it anywhere.
    public static func check(_ request: HTTPRequestSpec, secretKey: Secret, now: Int64) -> HTTPResponseSpec? {
        let authorizations = request.headers.filter { $0.name.lowercased() == "authorization" }
        guard !secretKey.isEmpty, authorizations.count == 1, isSecretKey(authorizations[0].value, secretKey) else {
            return HTTPResponseSpec(status: 401)
        }
        guard let kind = NetsRequestKind(request) else { return HTTPResponseSpec(status: 404) }
        guard kind.mayTakeEffect else { return nil }

        guard let contentType = request.header("Content-Type"), contentType.lowercased().hasPrefix("application/json") else {
            return HTTPResponseSpec(status: 415)
        }
        var errors = ValidationErrors()
        if kind == .createPayment, request.header("commercePlatformTag") != NetsPayments.commercePlatformTag {
            errors.add("commercePlatformTag", "The commercePlatformTag header must be '\(NetsPayments.commercePlatformTag)'.")
        }
        if let key = request.header("Idempotency-Key") {
            if !NetsIdentifiers.isValidIdempotencyKey(key) {
                errors.add("Idempotency-Key", "The Idempotency-Key header must be 1-64 printable characters.")
            }
        } else {
            errors.add("Idempotency-Key", "The Idempotency-Key header is required.")
        }
        guard let body = try? JSONValue.parse(request.body), body.objectValue != nil else {
            errors.add("body", "The request body must be a JSON object.")
            return errors.response
        }
        if kind == .chargePayment || kind == .refundCharge {
            // Charge and refund bodies carry the amount at the top level (Nexi's reference).
            if (body["amount"]?.integerValue ?? 0) <= 0 { errors.add("amount", "'Amount' must be an integer greater than 0.") }
            return errors.isEmpty ? nil : errors.response
        }
        validateOrder(body["order"], into: &errors)
        if kind == .createPayment {
            validateCheckout(body["checkout"], into: &errors)
            validateSubscription(body["subscription"], now: now, into: &errors)
            validateNotifications(body["notifications"], into: &errors)
        }
        return errors.isEmpty ? nil : errors.response
    }

    /// Nets Easy's payment API reference: `Authorization: <secret key>`, the raw key with no
    /// scheme. A plain string comparison of the sandbox's own, in constant time; no client code
    /// decides what passes.
    package static func isSecretKey(_ authorization: String, _ secretKey: Secret) -> Bool {
        SandboxCrypto.constantTimeEquals(Array(authorization.utf8), secretKey.utf8)
    }

    package static func validateOrder(_ value: JSONValue?, into errors: inout ValidationErrors) {
        guard let order = value, order.objectValue != nil else {
            errors.add("order", "The order field is required.")
            return
        }
        let amount = order["amount"]?.integerValue
        if (amount ?? 0) <= 0 { errors.add("order.amount", "'Amount' must be an integer greater than 0.") }
        if !(order["currency"]?.stringValue.map(Order.isAlpha3) ?? false) {
            errors.add("order.currency", "'Currency' must be an ISO 4217 alpha-3 code.")
        }
        if let reference = order["reference"], !isText(reference, max: 128) {
            errors.add("order.reference", "'Reference' must be a string of 1-128 characters.")
        }
        guard let items = order["items"]?.arrayValue, !items.isEmpty else {
            errors.add("order.items", "'Items' must not be empty.")
            return
        }
        var total: Int64 = 0
        var totalKnown = true
        for (index, item) in items.enumerated() {
            let prefix = "order.items[\(index)]"
            guard item.objectValue != nil else {
                errors.add(prefix, "An item must be an object.")
                totalKnown = false
                continue
            }
            for field in ["reference", "name", "unit"] where !isText(item[field], max: 128) {
                errors.add("\(prefix).\(field)", "'\(field)' must be a string of 1-128 characters.")
            }
            let quantity = item["quantity"]
            let quantityValid: Bool =
                switch quantity {
                case .integer(let q)?: q > 0
                case .fraction(let q)?: q > 0 && q.isFinite
                default: false
                }
            if !quantityValid { errors.add("\(prefix).quantity", "'Quantity' must be greater than 0.") }
            func amountField(_ name: String, required: Bool) -> Int64? {
                guard let value = item[name] else {
                    if required { errors.add("\(prefix).\(name)", "'\(name)' is required.") }
                    return required ? nil : 0
                }
                guard case .integer(let number) = value, number >= 0 else {
                    errors.add("\(prefix).\(name)", "'\(name)' must be a non-negative integer in minor units.")
                    return nil
                }
                return number
            }
            let unitPrice = amountField("unitPrice", required: true)
            let taxAmount = amountField("taxAmount", required: false)
            _ = amountField("taxRate", required: false)
            let net = amountField("netTotalAmount", required: true)
            let gross = amountField("grossTotalAmount", required: true)
            if let unitPrice, case .integer(let q)? = quantity, let net {
                let (product, overflow) = unitPrice.multipliedReportingOverflow(by: q)
                if overflow || product != net {
                    errors.add("\(prefix).netTotalAmount", "'Net total amount' must equal unit price × quantity.")
                }
            }
            if let net, let taxAmount, let gross {
                let (sum, overflow) = net.addingReportingOverflow(taxAmount)
                if overflow || sum != gross {
                    errors.add("\(prefix).grossTotalAmount", "'Gross total amount' must equal net total amount + tax amount.")
                }
            }
            if let gross, totalKnown {
                let (sum, overflow) = total.addingReportingOverflow(gross)
                if overflow { totalKnown = false } else { total = sum }
            } else {
                totalKnown = false
            }
        }
        if totalKnown, let amount, amount != total {
            errors.add("order.amount", "'Amount' must equal the sum of the items' gross total amounts (\(total)).")
        }
    }

    package static func validateCheckout(_ value: JSONValue?, into errors: inout ValidationErrors) {
        guard let checkout = value, checkout.objectValue != nil else {
            errors.add("checkout", "The checkout field is required.")
            return
        }
        if checkout["integrationType"]?.stringValue != "HostedPaymentPage" {
            errors.add("checkout.integrationType", "The iOS SDK opens the hosted payment page: integrationType must be 'HostedPaymentPage'.")
        }
        for field in ["returnUrl", "termsUrl", "cancelUrl"] {
            if let url = checkout[field], !(url.stringValue.map(NetsParams.isHTTPURL) ?? false) {
                errors.add("checkout.\(field)", "'\(field)' must be an absolute http(s) URL.")
            }
        }
    }

    package static func validateSubscription(_ value: JSONValue?, now: Int64, into errors: inout ValidationErrors) {
        guard let subscription = value, subscription.objectValue != nil else {
            errors.add("subscription", "The subscription field is required.")
            return
        }
        if let text = subscription["endDate"]?.stringValue, NetsEndDate.isWireFormatted(text), let endDate = NetsEndDate(iso8601: text) {
            if !endDate.isAfter(epochSeconds: now) { errors.add("subscription.endDate", "'End Date' must be in the future.") }
        } else {
            errors.add("subscription.endDate", "'End Date' must be formatted yyyy-MM-ddTHH:mm:ss+hh:mm.")
        }
        guard case .integer(let interval)? = subscription["interval"], interval >= 0, interval <= NetsPayments.maxIntervalDays else {
            errors.add("subscription.interval", "'Interval' must be an integer number of days, 0 or more.")
            return
        }
    }

    package static func validateNotifications(_ value: JSONValue?, into errors: inout ValidationErrors) {
        guard let notifications = value, notifications != .null else { return }
        guard let hooks = notifications["webHooks"]?.arrayValue, hooks.count <= 32 else {
            errors.add("notifications.webHooks", "'Web Hooks' must be an array of at most 32 webhooks.")
            return
        }
        for (index, hook) in hooks.enumerated() {
            let prefix = "notifications.webHooks[\(index)]"
            if !isText(hook["eventName"], max: 128) { errors.add("\(prefix).eventName", "'Event Name' is required.") }
            if !(hook["url"]?.stringValue.map { NetsParams.isHTTPURL($0) && $0.utf8.count <= 256 } ?? false) {
                errors.add("\(prefix).url", "'Url' must be an absolute http(s) URL of at most 256 characters.")
            }
            if !isWebhookAuthorization(hook["authorization"]) {
                errors.add("\(prefix).authorization", "'Authorization' must be 8-64 alphanumeric characters.")
            }
        }
    }

    /// Nets' payment API reference (PROVIDERS-LIFECYCLE §2, NX-API): a webhook's `authorization`
    /// is 8-64 alphanumeric characters (it comes back as the delivery's `Authorization` header).
    package static func isWebhookAuthorization(_ value: JSONValue?) -> Bool {
        guard let text = value?.stringValue else { return false }
        let bytes = Array(text.utf8)
        return (8...64).contains(bytes.count)
            && bytes.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
    }

    package static func isText(_ value: JSONValue?, max: Int) -> Bool {
        guard let text = value?.stringValue else { return false }
        return !text.isEmpty && text.count <= max
    }

    package static func json(_ status: Int, _ body: JSONValue) -> HTTPResponseSpec {
        HTTPResponseSpec(status: status, headers: [HTTPHeader("Content-Type", "application/json")], body: body.bytes)
    }
}
