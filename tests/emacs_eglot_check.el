;;; emacs_eglot_check.el --- eglot driving the completer server as a user would  -*- lexical-binding: t -*-
;;
;; emacs --batch -Q --eval <package setup> -l <the doc's snippet> -l tests/emacs_eglot_check.el
;; Environment: COMPLETER_EMACS_FILE (a Python file), COMPLETER_EMACS_TYPED (JSON list of line starts),
;; COMPLETER_EMACS_OUT (JSON report).  M-x eglot on the file; then for each line start: type it on a new last
;; line, C-M-i (completion-at-point), C-x o to the *Completions* list and RET on its first line, as the keys
;; would.  The report holds, for each, the items C-M-i had, the line as it was after C-M-i and after RET, the lines
;; listed, and the settings the server says it has (completer/info).

(require 'json)
(require 'subr-x)

(defun completer-check--info (server)
  "completer/info once the server's worker has loaded the model (it may still be loading after M-x eglot)."
  (let ((deadline (+ (float-time) 60)) info)
    (while (and (not (plist-get (setq info (jsonrpc-request server :completer/info nil)) :model))
                (< (float-time) deadline))
      (sleep-for 0.2))
    info))

(load (expand-file-name "emacs_completion_check.el" (file-name-directory load-file-name)) nil t)

(defun completer-check--run ()
  "The report: the Emacs version, the server's settings and one entry per line start typed."
  (find-file (getenv "COMPLETER_EMACS_FILE"))
  (call-interactively #'eglot)
  (let ((deadline (+ (float-time) 60)))
    (while (and (not (eglot-current-server)) (< (float-time) deadline))
      (accept-process-output nil 0.2)))
  (let* ((server (or (eglot-current-server) (error "eglot did not connect")))
         (info (completer-check--info server)))
    `((emacs . ,emacs-version)
      (settings . ,(plist-get info :settings))
      (cases . ,(vconcat (mapcar #'completer-check--type
                                 (json-read-from-string (getenv "COMPLETER_EMACS_TYPED"))))))))

(let ((report (condition-case err (completer-check--run)
                (error `((error . ,(error-message-string err)))))))
  (with-temp-file (getenv "COMPLETER_EMACS_OUT")
    (insert (json-encode report)))
  (when-let ((server (ignore-errors (eglot-current-server))))
    (ignore-errors (eglot-shutdown server)))
  (kill-emacs 0))

;;; emacs_eglot_check.el ends here
