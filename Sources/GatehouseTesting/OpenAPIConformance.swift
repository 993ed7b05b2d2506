import Foundation
import GatehouseCore

/// Checks real exchanges against an OpenAPI 3.1 document with Debian's python3-jsonschema (JSON
/// Schema 2020-12, `date-time` checked as RFC 3339), not with Gatehouse's own code: the status
/// must be one the operation lists, the media type one that status lists, and the body must
/// match that media type's schema (each line of an `application/x-ndjson` body its `x-item-schema`); every header the answer's documentation marks required must
/// be there, and a documented header that came must match its schema; a JSON request the server
/// took (2xx) must match the operation's request schema, so the document refuses nothing the
/// server accepts.
public enum OpenAPIConformance {
    /// One request and the server's answer, and the documented operation (`pathTemplate` as the
    /// document writes it) that answered.
    public struct Exchange: Sendable {
        public let method: String
        public let pathTemplate: String
        public let requestBody: [UInt8]?
        public let requestContentType: String?
        public let response: TestResponse

        public init(_ method: String, _ pathTemplate: String, requestBody: [UInt8]?, requestContentType: String?, _ response: TestResponse) {
            self.method = method
            self.pathTemplate = pathTemplate
            self.requestBody = requestBody
            self.requestContentType = requestContentType
            self.response = response
        }
    }

    /// What both scripts start with: the document (argv[1]), its `$ref` resolver, and the one
    /// format checked (RFC 3339 date-times).
    static let prelude = #"""
        import json, re, sys
        from jsonschema import Draft202012Validator, FormatChecker, RefResolver
        document = json.load(open(sys.argv[1]))
        resolver = RefResolver.from_schema(document)
        formats = FormatChecker(formats=())
        @formats.checks("date-time")
        def rfc3339(value):
            return not isinstance(value, str) or re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", value) is not None
        def resolve(node):
            while isinstance(node, dict) and "$ref" in node:
                node = resolver.resolve(node["$ref"])[1]
            return node

        """#

    static let script = prelude + #"""
        exchanges = json.load(open(sys.argv[2]))
        def check(where, schema, text):
            try:
                value = json.loads(text)
            except ValueError as error:
                problems.append(where + ": not JSON: %s" % error); return
            for error in Draft202012Validator(schema, resolver=resolver, format_checker=formats).iter_errors(value):
                problems.append(where + ": at /%s: %s" % ("/".join(str(p) for p in error.absolute_path), error.message[:300]))
        problems = []
        for e in exchanges:
            where = "%s %s -> %d" % (e["method"], e["path"], e["status"])
            operation = document["paths"].get(e["path"], {}).get(e["method"].lower())
            if operation is None:
                problems.append(where + ": no such operation"); continue
            if e["status"] < 300 and e["request_body"]:
                media = (e["request_content_type"] or "").split(";")[0].strip().lower()
                request = resolve(operation.get("requestBody", {})).get("content", {})
                if media not in request:
                    problems.append(where + ": request media type %r not documented" % media)
                elif media == "application/json" or media.endswith("+json"):
                    check(where + " (request)", request[media]["schema"], e["request_body"])
            # Only the exact status: an "NXX" or "default" entry would admit anything.
            response = operation.get("responses", {}).get(str(e["status"]))
            if response is None:
                problems.append(where + ": status not documented"); continue
            for name, header in resolve(response).get("headers", {}).items():
                header = resolve(header)
                value = e["headers"].get(name.lower())
                if value is None:
                    if header.get("required"):
                        problems.append(where + ": no %s header" % name)
                    continue
                schema = header.get("schema", {})
                if schema.get("type") == "integer":
                    if not re.fullmatch(r"[0-9]+", value):
                        problems.append(where + ": %s %r is not an integer" % (name, value))
                else:
                    check(where + " (header %s)" % name, schema, json.dumps(value))
            content = resolve(response).get("content")
            body = e["body"]
            if not content:
                if body:
                    problems.append(where + ": a body where the document has none")
                continue
            media = (e["content_type"] or "").split(";")[0].strip().lower()
            if media not in content:
                problems.append(where + ": media type %r not documented (%s)" % (media, ", ".join(content))); continue
            if media.endswith("json"):
                if media == "application/x-ndjson":
                    # One JSON value a line, each ending in a newline, each matching the line's
                    # schema (`x-item-schema`; OpenAPI 3.2 calls it itemSchema).
                    if "x-item-schema" not in content[media]:
                        problems.append(where + ": no x-item-schema for %r" % media); continue
                    if body and not body.endswith("\n"):
                        problems.append(where + ": the last NDJSON line has no newline")
                    for number, line in enumerate(body.splitlines()):
                        check("%s line %d" % (where, number + 1), content[media]["x-item-schema"], line)
                    continue
                if "schema" not in content[media]:
                    problems.append(where + ": no schema for %r" % media); continue
                check(where, content[media]["schema"], body)
        print(json.dumps(problems))
        """#

    static let examplesScript = prelude + #"""
        problems = []
        def check(where, schema, value):
            for error in Draft202012Validator(schema, resolver=resolver, format_checker=formats).iter_errors(value):
                problems.append(where + ": at /%s: %s" % ("/".join(str(p) for p in error.absolute_path), error.message[:300]))
        def media(where, content):
            for name, entry in content.items():
                if "example" in entry and "schema" in entry and name.endswith("json") and name != "application/x-ndjson":
                    check(where + " " + name, entry["schema"], entry["example"])
        for name, schema in document["components"]["schemas"].items():
            if "example" in schema:
                check("schema " + name, schema, schema["example"])
        for path, item in document["paths"].items():
            for method, op in item.items():
                if not isinstance(op, dict) or "operationId" not in op:
                    continue
                where = op["operationId"]
                media(where + " request", resolve(op.get("requestBody", {})).get("content", {}))
                for status, response in op["responses"].items():
                    media("%s %s" % (where, status), resolve(response).get("content", {}))
                for parameter in op.get("parameters", []):
                    parameter = resolve(parameter)
                    if "example" in parameter:
                        check("%s parameter %s" % (where, parameter["name"]), parameter["schema"], parameter["example"])
        print(json.dumps(problems))
        """#

    /// Every example of `document` (components' schemas, request and response bodies, parameters)
    /// checked against its schema; the problems found, one line each.
    public static func exampleProblems(document: URL) throws -> [String] {
        let output = try ExternalProgram.run(ExternalProgram.python, ["-c", examplesScript, document.path])
        guard case .array(let lines) = try JSON.parse(Array(output.utf8)) else {
            throw TestHTTPClient.Failure(description: "the OpenAPI example check printed \(output)")
        }
        return lines.compactMap(\.stringValue)
    }

    /// The problems found, one line each; empty when every answer conforms.
    public static func problems(document: URL, _ exchanges: [Exchange]) throws -> [String] {
        let records: [JSON] = exchanges.map {
            [
                "method": .string($0.method), "path": .string($0.pathTemplate), "status": .int(Int64($0.response.status)),
                "content_type": .optional($0.response.header("Content-Type")), "body": .string($0.response.text),
                "request_body": .optional($0.requestBody.map { String(decoding: $0, as: UTF8.self) }),
                "request_content_type": .optional($0.requestContentType),
                "headers": .object(Dictionary($0.response.headers.map { ($0.name, JSON.string($0.value)) }, uniquingKeysWith: { first, _ in first })),
            ]
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-openapi-\(UUID().uuidString).json")
        try Data(JSON.array(records).serialized()).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try ExternalProgram.run(ExternalProgram.python, ["-c", script, document.path, file.path])
        guard case .array(let lines) = try JSON.parse(Array(output.utf8)) else {
            throw TestHTTPClient.Failure(description: "the OpenAPI check printed \(output)")
        }
        return lines.compactMap(\.stringValue)
    }
}
