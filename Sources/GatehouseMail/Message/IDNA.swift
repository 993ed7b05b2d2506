import CCurl
import Foundation

/// Internationalized domain names in their ASCII form (IDNA A-labels, `bücher.example` →
/// `xn--bcher-kva.example`), converted by libcurl (libidn2 underneath: UTS #46 non-transitional,
/// then transitional, as libcurl's own SMTP envelope does), never by code of our own.
enum IDNA {
    /// `domain` in A-labels: the same text when it is ASCII, `nil` when it is not a name IDNA can
    /// write (a label too long once encoded, a leading combining mark, a `%`, a character a host
    /// name cannot hold, or no C.UTF-8 locale on this system).
    static func asciiDomain(_ domain: String) -> String? {
        if domain.utf8.allSatisfy({ $0 < 0x80 }) { return domain }
        // libcurl's URL parser would percent-decode the host ("%41" is "A"): such a domain is refused.
        guard !domain.contains("%"), let url = curl_url() else { return nil }
        defer { curl_url_cleanup(url) }
        return UTF8Locale.run { () -> String? in
            guard curl_url_set(url, CURLUPART_URL, "http://\(domain)/", 0) == CURLUE_OK else { return nil }
            var host: UnsafeMutablePointer<CChar>?
            guard curl_url_get(url, CURLUPART_HOST, &host, UInt32(CURLU_PUNYCODE)) == CURLUE_OK, let host else { return nil }
            defer { curl_free(host) }
            let ascii = String(cString: host)
            return !ascii.isEmpty && ascii.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) ? ascii.lowercased() : nil
        }
    }
}

/// Runs libcurl calls that convert host names (``IDNA``, an SMTP envelope) with a C.UTF-8
/// `LC_CTYPE` on the calling thread: libidn2 reads host names in the locale's charset, and the
/// process runs in the C locale. `uselocale` changes the calling thread only, and the previous
/// locale is restored before returning, so nothing else in the process sees it.
enum UTF8Locale {
    /// A `locale_t` is never changed once made and may be used from any thread (POSIX).
    private struct Locale: @unchecked Sendable { let value: locale_t? }
    private static let utf8 = Locale(value: gh_utf8_ctype_locale())

    static func run<T>(_ body: () -> T) -> T {
        guard let locale = utf8.value else { return body() }
        let previous = uselocale(locale)
        defer { uselocale(previous) }
        return body()
    }
}
