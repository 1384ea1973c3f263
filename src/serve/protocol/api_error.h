#pragma once
// An error a client caused (or the server hit), in OpenAI's shape:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code": null}}
// Handlers throw it; the HTTP layer turns it into the response with its status code.
#include <stdexcept>
#include <string>

#include "encoding/python_json.h"

namespace deepinfer::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = {},
           std::string code = {})
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

  encoding::Json to_json() const {
    encoding::Json error = {{"message", what()},
                            {"type", type_},
                            {"param", param_.empty() ? encoding::Json() : encoding::Json(param_)},
                            {"code", code_.empty() ? encoding::Json() : encoding::Json(code_)}};
    return {{"error", std::move(error)}};
  }

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error naming the parameter.
inline ApiError bad_request(std::string message, std::string param = {}, std::string code = {}) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

}  // namespace deepinfer::serve
