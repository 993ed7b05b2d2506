import GatehouseSQL
import Testing

@Suite struct SQLRenderingTests {
    @Test func interpolationsBecomeNumberedBindsPerDialect() {
        let email = "a@example.com'; --"
        let sql: SQL = "UPDATE users SET email = \(email) WHERE app_id = \("app") AND id = \(7)"
        let sqlite = sql.render(.sqlite)
        #expect(sqlite.text == "UPDATE users SET email = ?1 WHERE app_id = ?2 AND id = ?3")
        #expect(sqlite.binds == [.text(email), .text("app"), .integer(7)])
        let postgres = sql.render(.postgres)
        #expect(postgres.text == "UPDATE users SET email = $1 WHERE app_id = $2 AND id = $3")
        #expect(postgres.binds == sqlite.binds)
    }

    @Test func nestedFragmentsAreRenumbered() {
        let filter: SQL = "expires_at > \(Int64(1_000)) AND revoked = \(false)"
        let sql: SQL = "SELECT id FROM sessions WHERE user_id = \("u1") AND \(filter) LIMIT \(10)"
        let rendered = sql.render(.postgres)
        #expect(rendered.text == "SELECT id FROM sessions WHERE user_id = $1 AND expires_at > $2 AND revoked = $3 LIMIT $4")
        #expect(rendered.binds == [.text("u1"), .integer(1_000), .integer(0), .integer(10)])
    }

    @Test func onlyUnsafeSQLSplicesRawText() {
        let column = "created_at"
        let sql: SQL = "SELECT \(unsafeSQL: column) FROM t WHERE name = \(column)"
        #expect(sql.render(.sqlite).text == "SELECT created_at FROM t WHERE name = ?1")
        #expect(sql.render(.sqlite).binds == [.text("created_at")])
    }

    @Test func everyBindableTypeMapsToItsValue() {
        let none: String? = nil
        let sql: SQL = "\(none) \(Optional("x")) \(Int64.min) \(true) \([UInt8]([0, 255])) \(SQLValue.null) \(Substring("s"))"
        #expect(sql.render(.sqlite).binds == [.null, .text("x"), .integer(.min), .integer(1), .blob([0, 255]), .null, .text("s")])
    }

    @Test func listsBindEachValueAndEmptyListsMatchNothing() {
        let ids: [String] = ["a", "b"]
        let empty: [Int] = []
        let sql: SQL = "x IN (\(list: ids)) OR y IN (\(list: empty))"
        #expect(sql.render(.postgres).text == "x IN ($1, $2) OR y IN (NULL)")
    }

    @Test func fragmentsConcatenateAndJoin() {
        let conditions: [SQL] = ["a = \(1)", "b = \(2)", "c IS NULL"]
        let sql: SQL = "SELECT * FROM t WHERE " + conditions.joined(separator: " AND ")
        #expect(sql.render(.sqlite).text == "SELECT * FROM t WHERE a = ?1 AND b = ?2 AND c IS NULL")
        #expect(sql.render(.sqlite).binds == [.integer(1), .integer(2)])
    }

    @Test func rowDecodesByColumnName() throws {
        let row = SQLRow(
            columns: ["id", "n", "flag", "data", "missing", "sum"],
            values: [.text("x"), .integer(3), .integer(1), .blob([1]), .null, .text("12")])
        #expect(try row.string("id") == "x")
        #expect(try row.int("n") == 3)
        #expect(try row.bool("flag"))
        #expect(try row.bytes("data") == [1])
        #expect(try row.optionalString("missing") == nil)
        #expect(try row.int64("sum") == 12)  // PostgreSQL numeric arrives as text
        #expect(throws: SQLError.self) { try row.bool("n") }
        #expect(throws: SQLError.self) { try row.string("n") }
    }

    @Test func errorDescriptionCarriesKindAndConstraint() {
        let error = SQLError(kind: .uniqueViolation, message: "duplicate", constraint: "users_email_key")
        #expect(error.description == "SQLError(uniqueViolation): duplicate [constraint: users_email_key]")
    }
}
