import PaypipeCore
import Viva

/// The test merchant and orders every Viva suite shares.
public enum VivaFixtures {
    public static let config = VivaConfig(merchantKey: "SG23323424EXS3", appId: "com.vivawallet.InterAppDemo", callback: "interapp-callback")

    public static func saleOrder(amount: Int64? = 1200, _ params: [String: JSONValue] = [:]) -> Order {
        Order(orderId: "ord-viva-1", operation: .sale, amount: amount, currency: "EUR", params: params)
    }
}
