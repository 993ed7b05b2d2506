import GatehouseCore
import GatehouseCrypto

/// `?limit=` (1–100, default 50) and an opaque `?cursor=` for list endpoints.
struct Page {
    let limit: Int
    let offset: Int

    init(_ request: Request) throws(GatehouseError) {
        var errors: [FieldError] = []
        let limit = Self.limit(request, errors: &errors)
        var offset = 0
        if let cursor = request.http.queryValue("cursor") {
            if let bytes = Base64URL.decode(cursor), let text = String(validating: bytes, as: UTF8.self), text.hasPrefix("o:"),
                let n = Int(text.dropFirst(2)), n >= 0
            {
                offset = n
            } else {
                errors.append(FieldError("cursor", "Not a cursor this endpoint gave out."))
            }
        }
        if !errors.isEmpty { throw .validation(errors) }
        self.limit = limit
        self.offset = offset
    }

    /// `?limit=`: 1–100, 50 when absent; anything else is a field error.
    static func limit(_ request: Request, errors: inout [FieldError]) -> Int {
        guard let text = request.http.queryValue("limit") else { return 50 }
        if let n = Int(text), (1...100).contains(n) { return n }
        errors.append(FieldError("limit", "Must be a whole number from 1 to 100."))
        return 50
    }

    /// The page of `items` and the list response `{"data": […], "next_cursor": …}`.
    func response<T>(_ items: [T], _ render: (T) -> JSON) -> JSON {
        let slice = items.dropFirst(offset).prefix(limit)
        let end = offset + slice.count
        let next: JSON = end < items.count ? .string(Base64URL.encode(Array("o:\(end)".utf8))) : .null
        return ["data": .array(slice.map(render)), "next_cursor": next]
    }
}
