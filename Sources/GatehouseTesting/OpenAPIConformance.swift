import Foundation
import GatehouseCore

/// Checks real answers against an OpenAPI 3.1 document with Debian's python3-jsonschema (JSON
/// Schema 2020-12), not with Gatehouse's own code: the status must be one the operation lists,
/// the media type one that status lists, and the body must match that media type's schema.
public enum OpenAPIConformance {
    /// One answer of the server, and the documented operation (`pathTemplate` as the document
    /// writes it) that produced it.
    public struct Exchange: Sendable {
        public let method: String
        public let pathTemplate: String
        public let response: TestResponse

        public init(_ method: String, _ pathTemplate: String, _ response: TestResponse) {
            self.method = method
            self.pathTemplate = pathTemplate
            self.response = response
        }
    }

    static let script = """
        import json, sys
        from jsonschema import Draft202012Validator, RefResolver
        document = json.load(open(sys.argv[1]))
        exchanges = json.load(open(sys.argv[2]))
        resolver = RefResolver.from_schema(document)
        def resolve(node):
            while isinstance(node, dict) and "$ref" in node:
                node = resolver.resolve(node["$ref"])[1]
            return node
        problems = []
        for e in exchanges:
            where = "%s %s -> %d" % (e["method"], e["path"], e["status"])
            operation = document["paths"].get(e["path"], {}).get(e["method"].lower())
            if operation is None:
                problems.append(where + ": no such operation"); continue
            responses = operation.get("responses", {})
            response = responses.get(str(e["status"])) or responses.get("%dXX" % (e["status"] // 100)) or responses.get("default")
            if response is None:
                problems.append(where + ": status not documented"); continue
            content = resolve(response).get("content")
            body = e["body"]
            if not content:
                if body:
                    problems.append(where + ": a body where the document has none")
                continue
            media = (e["content_type"] or "").split(";")[0].strip().lower()
            if media not in content:
                problems.append(where + ": media type %r not documented (%s)" % (media, ", ".join(content))); continue
            schema = content[media].get("schema")
            if schema is None or not media.endswith("json"):
                continue
            try:
                value = json.loads(body)
            except ValueError as error:
                problems.append(where + ": not JSON: %s" % error); continue
            for error in Draft202012Validator(schema, resolver=resolver).iter_errors(value):
                problems.append(where + ": at /%s: %s" % ("/".join(str(p) for p in error.absolute_path), error.message[:300]))
        print(json.dumps(problems))
        """

    /// The problems found, one line each; empty when every answer conforms.
    public static func problems(document: URL, _ exchanges: [Exchange]) throws -> [String] {
        let records: [JSON] = exchanges.map {
            [
                "method": .string($0.method), "path": .string($0.pathTemplate), "status": .int(Int64($0.response.status)),
                "content_type": .optional($0.response.header("Content-Type")), "body": .string($0.response.text),
            ]
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-openapi-\(UUID().uuidString).json")
        try Data(JSON.array(records).serialized()).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try IndependentJWTVerifier.run(IndependentJWTVerifier.python, ["-c", script, document.path, file.path])
        guard case .array(let lines) = try JSON.parse(Array(output.utf8)) else {
            throw TestHTTPClient.Failure(description: "the OpenAPI check printed \(output)")
        }
        return lines.compactMap(\.stringValue)
    }
}
