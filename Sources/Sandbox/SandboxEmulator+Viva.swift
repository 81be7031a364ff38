import PaypipeCore
import Viva

/// Viva under `/viva`: `POST /sale` with `{"uri": "vivapayclient://pay/v1?..."}` stands in for
/// the Viva app (an inter-app call, no HTTP API at Viva): the sale URL is read as the app would
/// (`VivaSandbox.readSale`) and answered with `{"callback": "<callback URI the app would open>"}`
/// for an approved sale, or 400 naming what is wrong with the URL.
enum VivaEmulation {
    static let salePath = "/sale"

    static func handle(_ request: HTTPRequestSpec) -> HTTPResponseSpec {
        guard request.url == salePath else { return SandboxEmulator.json(404, ["error": "no such Viva route"]) }
        guard request.method == .POST else { return SandboxEmulator.json(405, ["error": "use POST"]) }
        guard let uri = (try? JSONValue.parse(request.body))?["uri"]?.stringValue else {
            return SandboxEmulator.json(400, ["error": "body must be {\"uri\": \"<sale request URL>\"}"])
        }
        do {
            let sale = try VivaSandbox.readSale(uri)
            return SandboxEmulator.json(200, ["callback": .string(VivaSandbox.approved(sale).uri)])
        } catch {
            return SandboxEmulator.json(400, ["error": .string(String(describing: error))])
        }
    }
}
