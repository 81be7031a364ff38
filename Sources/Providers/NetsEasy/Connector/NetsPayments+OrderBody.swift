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
        _ order: Order, params: ParamReader, reference: String, defaultItemName: String
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
        if let given = try params.optionalArray("items", count: 1...maxItems) {
            items = try validatedItems(given, amount: amount, params: params)
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

    static func validatedItems(_ elements: [JSONValue], amount: Int64, params: ParamReader) throws(Rejection) -> [JSONValue] {
        var items: [JSONValue] = []
        items.reserveCapacity(elements.count)
        var total: Int64 = 0
        for (index, element) in elements.enumerated() {
            let item = try ParamReader(element: element, at: params.field("items[\(index)]"), allowed: itemFields)
            let reference = try item.netsText("reference")
            let name = try item.netsText("name")
            let unit = try item.netsText("unit")
            let quantity = try item.integer("quantity", in: 1...1_000_000)
            let unitPrice = try item.integer("unitPrice", in: 0...Int64.max)
            let taxRate = try item.optionalInteger("taxRate", in: 0...10_000) ?? 0
            let taxAmount = try item.optionalInteger("taxAmount", in: 0...Int64.max) ?? 0
            let netTotal = try item.integer("netTotalAmount", in: 0...Int64.max)
            let grossTotal = try item.integer("grossTotalAmount", in: 0...Int64.max)

            let (expectedNet, netOverflow) = unitPrice.multipliedReportingOverflow(by: quantity)
            guard !netOverflow, netTotal == expectedNet else {
                throw item.invalid(
                    "netTotalAmount", "must equal unitPrice × quantity (\(netOverflow ? "overflow" : String(expectedNet))), got \(netTotal)")
            }
            let (expectedGross, grossOverflow) = netTotal.addingReportingOverflow(taxAmount)
            guard !grossOverflow, grossTotal == expectedGross else {
                throw item.invalid(
                    "grossTotalAmount",
                    "must equal netTotalAmount + taxAmount (\(grossOverflow ? "overflow" : String(expectedGross))), got \(grossTotal)")
            }
            let (sum, sumOverflow) = total.addingReportingOverflow(grossTotal)
            guard !sumOverflow else {
                throw item.invalid("grossTotalAmount", "makes the items' total overflow")
            }
            total = sum
            items.append([
                "reference": .string(reference), "name": .string(name), "quantity": .integer(quantity), "unit": .string(unit),
                "unitPrice": .integer(unitPrice), "taxRate": .integer(taxRate), "taxAmount": .integer(taxAmount),
                "grossTotalAmount": .integer(grossTotal), "netTotalAmount": .integer(netTotal),
            ])
        }
        guard total == amount else {
            throw params.invalid(
                "items", "grossTotalAmount values must add up to the order amount \(amount), they add up to \(total)")
        }
        return items
    }
}
