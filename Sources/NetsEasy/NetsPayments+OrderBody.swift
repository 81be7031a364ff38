import PaypipeCore

extension NetsPayments {
    /// The fields an `items` element may carry (Nets' order item); `taxRate` and `taxAmount`
    /// are optional and default to 0 as in Nets' API.
    static let itemFields = [
        "reference", "name", "quantity", "unit", "unitPrice", "taxRate", "taxAmount", "grossTotalAmount", "netTotalAmount",
    ]
    static let maxItems = 1000

    /// Nets' `order` object: `{items, amount, currency, reference}`, all amounts in integer
    /// minor units. Without `params.items` one item carries the whole amount, so the order
    /// always satisfies Nets' rule that the items add up to the amount.
    static func orderBody(
        _ order: Order, params: NetsParams, reference: String, defaultItemName: String
    ) throws(Rejection) -> JSONValue {
        guard let amount = order.amount else {
            throw Rejection(.missingField, field: "amount", "amount is required for nets \(order.operation.rawValue)")
        }
        guard amount > 0 else {
            throw Rejection(.amountNotPositive, field: "amount", "amount must be greater than 0, got \(amount)")
        }
        guard let currency = order.currency else {
            throw Rejection(.missingField, field: "currency", "currency is required for nets \(order.operation.rawValue)")
        }
        guard Order.isAlpha3(currency) else {
            throw Rejection(.invalidCurrency, field: "currency", "currency must be an ISO 4217 alpha-3 code (three capital letters)")
        }
        let items: [JSONValue]
        if let given = params.values["items"], given != .null {
            items = try validatedItems(given, amount: amount)
        } else {
            items = [
                [
                    "reference": .string(reference), "name": .string(defaultItemName), "quantity": 1, "unit": "pcs",
                    "unitPrice": .integer(amount), "taxRate": 0, "taxAmount": 0,
                    "grossTotalAmount": .integer(amount), "netTotalAmount": .integer(amount),
                ]
            ]
        }
        return [
            "items": .array(items), "amount": .integer(amount), "currency": .string(currency), "reference": .string(reference),
        ]
    }

    static func validatedItems(_ value: JSONValue, amount: Int64) throws(Rejection) -> [JSONValue] {
        guard case .array(let elements) = value else {
            throw Rejection.invalidParam("items", "must be an array of order items, got \(value.typeName)")
        }
        guard !elements.isEmpty, elements.count <= maxItems else {
            throw Rejection.invalidParam("items", "must hold 1-\(maxItems) items")
        }
        var items: [JSONValue] = []
        items.reserveCapacity(elements.count)
        var total: Int64 = 0
        for (index, element) in elements.enumerated() {
            let prefix = "items[\(index)]"
            guard case .object(let fields) = element else {
                throw Rejection.invalidParam(prefix, "must be an object, got \(element.typeName)")
            }
            if let unknown = fields.keys.filter({ !itemFields.contains($0) }).sorted().first {
                throw Rejection(
                    .unknownField, field: "params.\(prefix).\(unknown.prefix(64))",
                    "params.\(prefix).\(unknown.prefix(64)) is not an order item field (allowed: \(itemFields.joined(separator: ", ")))")
            }
            func text(_ name: String) throws(Rejection) -> String {
                guard let field = fields[name] else { throw Rejection.missingParam("\(prefix).\(name)") }
                return try NetsParams.text(field, field: "\(prefix).\(name)", maxLength: 128)
            }
            func number(_ name: String, _ range: ClosedRange<Int64>, default fallback: Int64? = nil) throws(Rejection) -> Int64 {
                guard let field = fields[name] else {
                    if let fallback { return fallback }
                    throw Rejection.missingParam("\(prefix).\(name)")
                }
                return try NetsParams.integer(field, field: "\(prefix).\(name)", in: range)
            }
            let reference = try text("reference")
            let name = try text("name")
            let unit = try text("unit")
            let quantity = try number("quantity", 1...1_000_000)
            let unitPrice = try number("unitPrice", 0...Int64.max)
            let taxRate = try number("taxRate", 0...10_000, default: 0)
            let taxAmount = try number("taxAmount", 0...Int64.max, default: 0)
            let netTotal = try number("netTotalAmount", 0...Int64.max)
            let grossTotal = try number("grossTotalAmount", 0...Int64.max)

            let (expectedNet, netOverflow) = unitPrice.multipliedReportingOverflow(by: quantity)
            guard !netOverflow, netTotal == expectedNet else {
                throw Rejection.invalidParam("\(prefix).netTotalAmount", "must equal unitPrice × quantity (\(netOverflow ? "overflow" : String(expectedNet))), got \(netTotal)")
            }
            let (expectedGross, grossOverflow) = netTotal.addingReportingOverflow(taxAmount)
            guard !grossOverflow, grossTotal == expectedGross else {
                throw Rejection.invalidParam("\(prefix).grossTotalAmount", "must equal netTotalAmount + taxAmount (\(grossOverflow ? "overflow" : String(expectedGross))), got \(grossTotal)")
            }
            let (sum, sumOverflow) = total.addingReportingOverflow(grossTotal)
            guard !sumOverflow else {
                throw Rejection.invalidParam("\(prefix).grossTotalAmount", "makes the items' total overflow")
            }
            total = sum
            items.append([
                "reference": .string(reference), "name": .string(name), "quantity": .integer(quantity), "unit": .string(unit),
                "unitPrice": .integer(unitPrice), "taxRate": .integer(taxRate), "taxAmount": .integer(taxAmount),
                "grossTotalAmount": .integer(grossTotal), "netTotalAmount": .integer(netTotal),
            ])
        }
        guard total == amount else {
            throw Rejection.invalidParam(
                "items", "grossTotalAmount values must add up to the order amount \(amount), they add up to \(total)")
        }
        return items
    }
}
