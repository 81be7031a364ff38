import HTTPTypes
import Hummingbird
import NIOCore
import PaypipeCore

/// Adapts Hummingbird requests to the router's plain values and back.
package struct SandboxResponder: HTTPResponder {
    package typealias Context = BasicRequestContext

    package let router: SandboxRouter
    package let maxBodyBytes: Int

    package func respond(to request: Request, context: Context) async throws -> Response {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: maxBodyBytes)
        } catch {
            return Self.response(SandboxContext.json(413, ["error": "request body too large"]))
        }
        var headers: [HTTPHeader] = []
        headers.reserveCapacity(request.headers.count)
        for field in request.headers { headers.append(HTTPHeader(field.name.rawName, field.value)) }
        let reply = await router.handle(
            method: request.method.rawValue, path: request.uri.path, query: request.uri.query, headers: headers,
            body: Array(buffer.readableBytesView))
        return Self.response(reply)
    }

    package static func response(_ spec: HTTPResponseSpec) -> Response {
        var fields = HTTPFields()
        for header in spec.headers {
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }
        return Response(
            status: HTTPResponse.Status(code: spec.status), headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: spec.body)))
    }
}
