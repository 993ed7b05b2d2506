/// A value a mail template can ask for, written `{{app_name}}` in a template.
public enum Placeholder: String, CaseIterable, Sendable {
    case appName = "app_name"
    case code
    case minutes
    case newEmail = "new_email"
}

/// One part of a template (its subject, text or HTML body), split into literal text and
/// placeholders when it is loaded: the files shipped with the server once at startup, an app's own
/// templates (`email.templates`) once each time its settings are decoded. Values are put in by
/// walking the pieces once, so a value that itself reads `{{code}}` (an app named so) is never
/// filled in again.
public struct TemplateText: Sendable, Equatable {
    public enum Piece: Sendable, Equatable {
        case literal(String)
        case value(Placeholder)
    }

    public private(set) var pieces: [Piece]

    public var placeholders: Set<Placeholder> {
        Set(pieces.compactMap { if case .value(let placeholder) = $0 { placeholder } else { nil } })
    }

    /// What is wrong with a part's text.
    public enum Problem: Error, Equatable {
        case unknownPlaceholder(String)
        /// A `{{` with no `}}` after it.
        case unclosedBraces
    }

    public init(parsing text: String) throws(Problem) {
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

    public static func + (lhs: TemplateText, rhs: TemplateText) -> TemplateText {
        var joined = lhs
        joined.pieces += rhs.pieces
        return joined
    }

    /// The literal pieces changed by `transform`, the placeholders kept.
    public func mappingLiterals(_ transform: (String) -> String) -> TemplateText {
        var mapped = self
        mapped.pieces = pieces.map { if case .literal(let text) = $0 { .literal(transform(text)) } else { $0 } }
        return mapped
    }

    public func rendered(_ value: (Placeholder) -> String) -> String {
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

/// A part of a mail template.
public enum TemplatePart: String, Sendable, CaseIterable {
    case subject, text, html
}

extension EmailToSend.Template {
    /// Whether the mail carries a code (every template but the notice).
    public var carriesCode: Bool { self != .emailChangedNotice }

    /// The placeholders this template has values for.
    public var placeholders: Set<Placeholder> { carriesCode ? [.appName, .code, .minutes] : [.appName, .newEmail] }

    /// What a part must hold: the subject names the app; each body names the app and gives the
    /// code and its lifetime (a code template) or the new address (the notice).
    public func required(in part: TemplatePart) -> Set<Placeholder> { part == .subject ? [.appName] : placeholders }

    /// What is wrong with `text` as `part` of this template, if anything. Checked for the files
    /// shipped with the server and for an app's own templates alike.
    public func problem(in part: TemplatePart, _ text: TemplateText) -> PlaceholderProblem? {
        let used = text.placeholders
        if let extra = used.subtracting(placeholders).sorted(by: { $0.rawValue < $1.rawValue }).first { return .noValue(extra) }
        if let missing = required(in: part).subtracting(used).sorted(by: { $0.rawValue < $1.rawValue }).first { return .missing(missing) }
        return nil
    }
}

/// Why a template's part is refused: it names a placeholder the template has no value for (it
/// would render empty), or lacks one it must hold.
public enum PlaceholderProblem: Sendable, Equatable {
    case noValue(Placeholder)
    case missing(Placeholder)
}
