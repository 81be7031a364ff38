import Foundation
import HTTPTransport
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import PaypipeCore
import Synchronization
import Testing

/// A loopback HTTP/1.1 server on plain sockets, one thread per connection, that answers each
/// request with what `respond` returns (raw bytes, so a test can send anything: a chunked body,
/// `Connection: close`, half a response, nothing at all) and counts connections and requests.
package final class ScriptedHTTPServer: Sendable {
    package enum Reply: Sendable {
        case bytes([UInt8], thenClose: Bool)
        /// Read the request, answer nothing, keep the connection open until the server stops.
        case silence
    }

    package struct Received: Sendable {
        package var requestLine: String
        package var headers: [(String, String)]
        package var body: [UInt8]
        package func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    package let port: Int
    private let listener: Int32
    private let state = Mutex((connections: 0, requests: [Received](), stopped: false, open: [Int32]()))
    private let respond: @Sendable (Received) -> Reply

    package init(respond: @escaping @Sendable (Received) -> Reply) throws {
        self.respond = respond
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            close(listener)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        port = Int(UInt16(bigEndian: address.sin_port))
        self.listener = listener
        Thread.detachNewThread { [self] in
            // This thread alone closes the listener, after `stop` shut it down: a descriptor
            // number closed elsewhere could already belong to another test's socket.
            defer { close(listener) }
            while true {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                let stopped = state.withLock { s -> Bool in
                    if s.stopped {
                        close(fd)
                        return true
                    }
                    s.connections += 1
                    s.open.append(fd)
                    return false
                }
                if stopped { return }
                Thread.detachNewThread { [self] in serve(fd) }
            }
        }
    }

    package var connections: Int { state.withLock { $0.connections } }
    package var requests: [Received] { state.withLock { $0.requests } }

    /// Shuts down the listener and every connection still open; their threads close them. Under
    /// the lock, so that no descriptor is shut down after its thread closed it (the number may be
    /// another test's socket by then).
    package func stop() {
        state.withLock { s in
            s.stopped = true
            shutdown(listener, Int32(SHUT_RDWR))
            for fd in s.open { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    private func serve(_ fd: Int32) {
        defer {
            state.withLock { s in
                s.open.removeAll { $0 == fd }
                close(fd)
            }
        }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)  // the whole suite can stall this process for seconds; `stop` ends it sooner
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        for _ in 0..<1000 {
            // One request: the head up to the blank line, then Content-Length bytes of body.
            var headEnd: Int?
            var received: Received?
            for _ in 0..<1000 {
                if headEnd == nil, let range = pending.firstRange(of: Array("\r\n\r\n".utf8)) { headEnd = range.upperBound }
                if let end = headEnd {
                    let lines = String(decoding: pending[..<(end - 4)], as: UTF8.self).components(separatedBy: "\r\n")
                    let headers = lines.dropFirst().compactMap { line -> (String, String)? in
                        guard let colon = line.firstIndex(of: ":") else { return nil }
                        return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                    }
                    let length = Int(headers.first { $0.0.lowercased() == "content-length" }?.1 ?? "0") ?? 0
                    if pending.count >= end + length {
                        received = Received(requestLine: lines.first ?? "", headers: headers, body: Array(pending[end..<(end + length)]))
                        pending.removeFirst(end + length)
                        break
                    }
                }
                let n = recv(fd, &chunk, chunk.count, 0)
                if n <= 0 { return }
                pending += chunk[0..<n]
            }
            guard let request = received else { return }
            state.withLock { $0.requests.append(request) }
            switch respond(request) {
            case .bytes(let bytes, let thenClose):
                _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if thenClose { return }
            case .silence:
                while recv(fd, &chunk, chunk.count, 0) > 0 {}
                return
            }
        }
    }

    package static func response(_ status: Int = 200, body: String, headers: [String] = []) -> [UInt8] {
        let head = (["HTTP/1.1 \(status) OK", "Content-Length: \(body.utf8.count)", "Content-Type: application/json"] + headers).joined(
            separator: "\r\n")
        return Array((head + "\r\n\r\n" + body).utf8)
    }
}
