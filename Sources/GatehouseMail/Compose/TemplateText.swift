/// A value a mail template can ask for, written `{{app_name}}` in a template file.
enum Placeholder: String, CaseIterable, Sendable {
    case appName = "app_name"
    case code
    case minutes
    case newEmail = "new_email"
}

/// One section of a template, split into literal text and placeholders when it is loaded. Values
/// are put in by walking the pieces once, so a value that itself reads `{{code}}` (an app named
/// so) is never filled in again.
struct TemplateText: Sendable {
    enum Piece: Sendable {
        case literal(String)
        case value(Placeholder)
    }

    private(set) var pieces: [Piece]

    var placeholders: Set<Placeholder> {
        Set(pieces.compactMap { if case .value(let placeholder) = $0 { placeholder } else { nil } })
    }

    /// What is wrong with a section's text.
    enum Problem: Error, Equatable {
        case unknownPlaceholder(String)
        /// A `{{` with no `}}` after it.
        case unclosedBraces
    }

    init(parsing text: String) throws(Problem) {
        pieces = []
        var rest = text[...]
        while let open = rest.range(of: "{{") {
            if open.lowerBound > rest.startIndex { pieces.append(.literal(String(rest[..<open.lowerBound]))) }
            guard let close = rest[open.upperBound...].range(of: "}}") else { throw .unclosedBraces }
            let name = String(rest[open.upperBound..<close.lowerBound])
            guard let placeholder = Placeholder(rawValue: name) else { throw .unknownPlaceholder(name) }
            pieces.append(.value(placeholder))
            rest = rest[close.upperBound...]
        }
        if !rest.isEmpty { pieces.append(.literal(String(rest))) }
    }

    static func + (lhs: TemplateText, rhs: TemplateText) -> TemplateText {
        var joined = lhs
        joined.pieces += rhs.pieces
        return joined
    }

    func rendered(_ value: (Placeholder) -> String) -> String {
        var out = ""
        for piece in pieces {
            switch piece {
            case .literal(let text): out += text
            case .value(let placeholder): out += value(placeholder)
            }
        }
        return out
    }
}
