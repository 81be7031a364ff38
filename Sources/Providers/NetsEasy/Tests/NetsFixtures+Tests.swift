import NetsEasy
import NetsEasyTesting
import PaypipeCore

typealias Fixtures = NetsFixtures

extension NetsFixtures {
    static func json(_ request: HTTPRequestSpec) throws -> JSONValue { try JSONValue.parse(request.body) }

    static func response(_ status: Int, _ body: String) -> HTTPResponseSpec {
        HTTPResponseSpec(status: status, body: Array(body.utf8))
    }
}

extension Rejection {
    /// Runs `body` and returns the Rejection it threw, or nil.
    /// Any other error type counts as "no Rejection", so a test expecting one fails.
    static func caught(_ body: () throws -> Void) -> Rejection? {
        do {
            try body()
            return nil
        } catch {
            return error as? Rejection
        }
    }
}
