import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The copies one connecting socket reaches through one configured endpoint: several addresses
/// separated by commas, and a host name in a `tcp://` address standing for every IPv4 address it
/// resolves to, as a Kubernetes headless service or a compose service with replicas does. The
/// names are resolved again every `refreshMilliseconds`: a copy that appears is connected, one
/// that is gone is disconnected, and nobody has to be reconfigured. A name that does not resolve
/// keeps what it had, or is connected by name for libzmq to resolve on each retry.
///
/// Touched only by the thread that owns its socket, but for the names' resolution, which runs
/// on a thread of its own (a slow or absent DNS server must not hold up a stage's loop) and
/// hands its answer over under a lock.
public final class ZMQPeers: @unchecked Sendable {
    public let endpoint: String
    public private(set) var connected: Set<String> = []
    private var nextRefresh: Int64 = 0
    /// Each entry's addresses, nil for one that did not resolve, once a resolution is done.
    private let resolved = Locked<[[String]?]?>(nil)
    private let resolving = Locked(false)

    public static let refreshMilliseconds: Int64 = 5000

    public init(_ endpoint: String) { self.endpoint = endpoint }

    /// Connects `socket` to every address the endpoint stands for and disconnects it from those
    /// it no longer does. `force` (the first connect) resolves here and now; otherwise at most
    /// once per `refreshMilliseconds` a resolution starts in the background, and a later call
    /// applies it.
    public func refresh(_ socket: ZMQSocket, force: Bool = false) throws(ZMQError) {
        let entries = Self.entries(of: endpoint)
        if force {
            try apply(entries.map(Self.resolve), to: socket, entries: entries)
            nextRefresh = Self.monotonicMilliseconds() + Self.refreshMilliseconds
            return
        }
        if let answer = resolved.withLock({ value -> [[String]?]? in
            defer { value = nil }
            return value
        }) {
            try apply(answer, to: socket, entries: entries)
        }
        let now = Self.monotonicMilliseconds()
        guard now >= nextRefresh else { return }
        nextRefresh = now + Self.refreshMilliseconds
        // Addresses only: nothing to look up.
        guard entries.contains(where: { Self.resolve($0, lookUp: false) == nil }) else { return }
        guard
            resolving.withLock({ busy in
                defer { busy = true }
                return !busy
            })
        else { return }
        let (resolved, resolving) = (self.resolved, self.resolving)
        startThread(name: "zmq-resolve") {
            let answer = entries.map(Self.resolve)
            resolved.withLock { $0 = answer }
            resolving.withLock { $0 = false }
        }
    }

    private func apply(_ answer: [[String]?], to socket: ZMQSocket, entries: [String]) throws(ZMQError) {
        var wanted: Set<String> = []
        for (entry, addresses) in zip(entries, answer) {
            if let addresses {
                wanted.formUnion(addresses)
            } else {
                // Unresolvable now: what this entry had stays, or libzmq resolves it itself.
                let kept = connected.filter { Self.entry(entry, couldBe: $0) }
                wanted.formUnion(kept.isEmpty ? [entry] : kept)
            }
        }
        for address in wanted.subtracting(connected) {
            _ = try socket.connect(address)
            connected.insert(address)
        }
        for address in connected.subtracting(wanted) {
            try socket.disconnect(address)
            connected.remove(address)
        }
    }

    /// The comma-separated addresses of an endpoint.
    public static func entries(of endpoint: String) -> [String] {
        endpoint.split(separator: ",").map { String($0.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed()) }
            .filter { !$0.isEmpty }
    }

    /// Every address a `tcp://host:port` entry stands for; the entry itself when its host is an
    /// address already (or it is not TCP); nil when the name does not resolve.
    static func resolve(_ entry: String) -> [String]? { resolve(entry, lookUp: true) }

    /// `lookUp` false: nil for an entry that names a host rather than an address.
    static func resolve(_ entry: String, lookUp: Bool) -> [String]? {
        guard entry.hasPrefix("tcp://") else { return [entry] }
        let rest = entry.dropFirst(6)
        guard let colon = rest.lastIndex(of: ":"), !rest.hasPrefix("[") else { return [entry] }
        let host = String(rest[..<colon]), port = rest[rest.index(after: colon)...]
        if host == "*" || isIPv4(host) { return [entry] }
        guard lookUp else { return nil }
        var hints = addrinfo()
        hints.ai_family = AF_INET
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(first) }
        var addresses: Set<String> = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            if info.pointee.ai_family == AF_INET, let raw = info.pointee.ai_addr {
                var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
                raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var inAddress = address.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &inAddress, &text, socklen_t(text.count))
                }
                addresses.insert(
                    "tcp://" + String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) + ":" + port)
            }
            cursor = info.pointee.ai_next
        }
        return addresses.isEmpty ? nil : addresses.sorted()
    }

    static func isIPv4(_ host: String) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, host, &address) == 1
    }

    /// Whether `address` may have come from resolving `entry` (same port).
    private static func entry(_ entry: String, couldBe address: String) -> Bool {
        guard let port = entry.split(separator: ":").last else { return false }
        return address == entry || address.hasSuffix(":" + port)
    }

    private static func monotonicMilliseconds() -> Int64 { Int64(monotonicNanoseconds() / 1_000_000) }
}
