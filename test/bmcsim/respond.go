package bmcsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// obj is a JSON object under construction. encoding/json sorts map keys, so "@odata.*"
// properties come first, as on real services, and output is byte-for-byte reproducible.
type obj = map[string]any

// Base registry message Ids used in error bodies; clients key retries and messages on them.
const (
	msgResourceMissing     = "Base.1.8.ResourceMissingAtURI"
	msgNoValidSession      = "Base.1.8.NoValidSession"
	msgMalformedJSON       = "Base.1.8.MalformedJSON"
	msgActionParamMissing  = "Base.1.8.ActionParameterMissing"
	msgActionParamValue    = "Base.1.8.ActionParameterValueNotInList"
	msgPropertyValue       = "Base.1.8.PropertyValueNotInList"
	msgPropertyValueFormat = "Base.1.8.PropertyValueFormatError"
	msgPropertyValueType   = "Base.1.8.PropertyValueTypeError"
	msgPropertyNotWritten  = "Base.1.8.PropertyNotWritable"
	msgPropertyUnknown     = "Base.1.8.PropertyUnknown"
	msgPreconditionFailed  = "Base.1.8.PreconditionFailed"
	msgOperationNotAllow   = "Base.1.8.OperationNotAllowed"
	msgInternalError       = "Base.1.8.InternalError"
	msgUnavailable         = "Base.1.8.ServiceTemporarilyUnavailable"

	msgActionParamUnknown      = "Base.1.8.ActionParameterUnknown"
	msgActionParamNotSupported = "Base.1.8.ActionParameterNotSupported"
	msgActionParamFormat       = "Base.1.8.ActionParameterValueFormatError"
	msgPropertyMissing         = "Base.1.8.PropertyMissing"
	msgResourceInUse           = "Base.1.8.ResourceInUse"
	msgUnsupportedMedia        = "Base.1.8.UnsupportedMediaType"
	msgCouldNotConnect         = "Base.1.8.CouldNotEstablishConnection"
	msgResourceAtURIMissing    = "Base.1.8.ResourceAtUriInUnknownFormat"
	msgResourceAtURIUnauth     = "Base.1.8.ResourceAtUriUnauthorized"
)

// writeJSON answers a Redfish resource with the headers every Redfish service sends.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, body any) {
	data, err := json.Marshal(body)
	if err != nil { // only our own types are marshalled; this is a programming error
		panic(fmt.Sprintf("bmcsim: marshal response: %v", err))
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("OData-Version", "4.0")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}

// writeNoContent answers a successful action the way most BMCs do.
func writeNoContent(w http.ResponseWriter) {
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(http.StatusNoContent)
}

// writeError answers with a Redfish error body: a general message plus one extended-info
// entry carrying the specific Base registry message, which clients show and key on.
func writeError(w http.ResponseWriter, r *http.Request, status int, messageID, message string, args ...string) {
	if args == nil {
		args = []string{}
	}
	writeJSON(w, r, status, obj{"error": obj{
		"code":    "Base.1.8.GeneralError",
		"message": "A general error has occurred. See ExtendedInfo for more information.",
		"@Message.ExtendedInfo": []obj{{
			"@odata.type": "#Message.v1_1_1.Message",
			"MessageId":   messageID,
			"Message":     message,
			"MessageArgs": args,
			"Severity":    "Critical",
			"Resolution":  "Correct the request and resubmit it if the operation failed.",
		}},
	}})
}

func writeNotFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, http.StatusNotFound, msgResourceMissing,
		fmt.Sprintf("The requested resource of type %s named '%s' was not found.", "Resource", r.URL.Path), "Resource", r.URL.Path)
}

func writeUnauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Basic realm="Redfish"`)
	writeError(w, r, http.StatusUnauthorized, msgNoValidSession,
		"There is no valid session established with the implementation.")
}

func writeMethodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, r, http.StatusMethodNotAllowed, msgOperationNotAllow,
		fmt.Sprintf("The HTTP method %s is not allowed on %s.", r.Method, r.URL.Path))
}
