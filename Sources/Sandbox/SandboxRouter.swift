import Logging
import PaypipeCore

/// Routes each request by path prefix to its provider's emulator, after counting it in the
/// ledger and applying the latency and error injection every provider gets. Shared state lives
/// in each emulator's own `Mutex`es with short critical sections, so concurrent requests (and
/// their injected latency) never queue behind each other.
package final class SandboxRouter: Sendable {
    package let context: SandboxContext
    package let injector: SandboxErrorInjector
    package let emulators: [Provider: any ProviderEmulator]

    package init(context: SandboxContext, emulators: [any ProviderEmulator]) {
        self.context = context
        injector = SandboxErrorInjector(rate: context.configuration.errorRate, seed: context.configuration.errorSeed)
        var byProvider: [Provider: any ProviderEmulator] = [:]
        for emulator in emulators {
            precondition(byProvider[type(of: emulator).provider] == nil, "two emulators for \(type(of: emulator).provider)")
            byProvider[type(of: emulator).provider] = emulator
        }
        self.emulators = byProvider
    }

    /// The provider an incoming path belongs to, and the path the provider itself would see.
    package enum Route {
        case health, ledger, clock
        case subscriptions(String)
        case provider(any ProviderEmulator, subpath: String)
        case notFound
    }

    package func route(_ path: String) -> Route {
        if path == "/healthz" { return .health }
        if path == "/_sandbox/ledger" || path == "/_sandbox/ledger/" { return .ledger }
        if path == "/_sandbox/clock" { return .clock }
        if path.hasPrefix("/_sandbox/subscriptions/") { return .subscriptions(path) }
        guard path.hasPrefix("/"), let slash = path.dropFirst().firstIndex(of: "/") else { return .notFound }
        guard let emulator = emulators[Provider(String(path[path.index(after: path.startIndex)..<slash]))] else { return .notFound }
        return .provider(emulator, subpath: String(path[slash...]))
    }

    /// Answers one request. `path` excludes the query; `query` is the raw query string.
    package func handle(method: String, path: String, query: String?, headers: [HTTPHeader], body: [UInt8]) async -> HTTPResponseSpec {
        switch route(path) {
        case .health:
            return SandboxContext.json(200, ["status": "ok"])
        case .ledger:
            guard method == "GET" else { return SandboxContext.json(405, ["error": "use GET"]) }
            let parameters = SandboxContext.queryParameters(query)
            let document = context.ledger.document(key: parameters["key"], summary: parameters["summary"] == "1")
            return HTTPResponseSpec(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: document.bytes)
        case .clock:
            guard method == "POST" else { return SandboxContext.json(405, ["error": "use POST"]) }
            return await advanceClock(body)
        case .subscriptions(let path):
            guard method == "POST" else { return SandboxContext.json(405, ["error": "use POST"]) }
            return await act(path: path, body: body)
        case .notFound:
            return SandboxContext.json(404, ["error": "no such route"])
        case .provider(let emulator, let subpath):
            guard let method = HTTPRequestSpec.Method(rawValue: method) else { return SandboxContext.json(405, ["error": "method not allowed"]) }
            // The emulator sees the path below its prefix, with the query if there is one.
            let url = query.map { subpath + "?" + $0 } ?? subpath
            return await handle(HTTPRequestSpec(method: method, url: url, headers: headers, body: body), by: emulator)
        }
    }

    package func handle(_ request: HTTPRequestSpec, by emulator: any ProviderEmulator) async -> HTTPResponseSpec {
        let ledger = context.ledger
        let keying = emulator.ledgerKey(request)
        if case .now(let key) = keying { ledger.received(key.map { type(of: emulator).provider.rawValue + ":" + $0.prefix(128) }) }
        if context.configuration.latencyMilliseconds > 0 {
            ledger.delayStarted()
            defer { ledger.delayEnded() }
            try? await Task.sleep(for: .milliseconds(context.configuration.latencyMilliseconds))
        }
        if injector.shouldFail() {
            if keying == .byEmulator { ledger.received(nil) }
            ledger.injectedError()
            return SandboxContext.json(500, ["error": "injected error: request not processed"])
        }
        return await emulator.handle(request, context: context)
    }
}
