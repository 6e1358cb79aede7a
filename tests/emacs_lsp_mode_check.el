;;; emacs_lsp_mode_check.el --- lsp-mode driving the completer server as a user would  -*- lexical-binding: t -*-
;;
;; emacs --batch -Q --eval <package setup> -l <the doc's snippet> -l tests/emacs_lsp_mode_check.el
;; Environment: COMPLETER_EMACS_FILE (a Python file), COMPLETER_EMACS_TYPED (JSON list of line starts),
;; COMPLETER_EMACS_OUT (JSON report).  M-x lsp on the file (its directory imported as the project root: the
;; answer `i' to lsp-mode's first question); then for each line start: type it on a new last line, C-M-i
;; (completion-at-point), C-x o to the *Completions* list and RET on its first line, as the keys would.  Then
;; maxSuggestions 1 registered and M-x completer-lsp-send-settings, as the doc says to change a setting, and each
;; line start again, where C-M-i now has a sole item to complete.  The report holds, for each line start, the items
;; C-M-i had, the line as it was after C-M-i and after RET, and the lines listed; and the settings the server says
;; it has (completer/info) before and after the change.

(require 'json)
(require 'subr-x)
(require 'lsp-mode)

(defun completer-check--workspace ()
  "The completer's lsp-mode workspace once it is initialized (M-x lsp starts it asynchronously)."
  (let ((deadline (+ (float-time) 60)) workspace)
    (while (and (not (and (setq workspace (lsp-find-workspace 'completer (buffer-file-name)))
                          (eq (lsp--workspace-status workspace) 'initialized)))
                (< (float-time) deadline))
      (accept-process-output nil 0.2))
    (or workspace (error "lsp-mode started no completer server"))))

(defun completer-check--info (workspace &optional until)
  "completer/info once the server's worker has loaded the model and UNTIL (a predicate on the settings) holds."
  (let ((deadline (+ (float-time) 60)) info)
    (while (and (not (and (setq info (with-lsp-workspace workspace (lsp-request "completer/info" nil)))
                          (gethash "model" info)
                          (or (null until) (funcall until (gethash "settings" info)))))
                (< (float-time) deadline))
      (sleep-for 0.2))
    info))

(load (expand-file-name "emacs_completion_check.el" (file-name-directory load-file-name)) nil t)

(defun completer-check--typed ()
  "Each line start typed, as an alist of what it left."
  (vconcat (mapcar #'completer-check--type (json-read-from-string (getenv "COMPLETER_EMACS_TYPED")))))

(defun completer-check--run ()
  "The report: the Emacs and lsp-mode versions, the server's settings, one entry per line start typed, and the
settings and entries after a change of maxSuggestions to 1."
  (find-file (getenv "COMPLETER_EMACS_FILE"))
  (lsp-workspace-folders-add default-directory)
  (call-interactively #'lsp)
  (let* ((workspace (completer-check--workspace))
         (settings (gethash "settings" (completer-check--info workspace)))
         (cases (completer-check--typed)))
    (lsp-register-custom-settings '(("completer.maxSuggestions" 1)))
    (call-interactively #'completer-lsp-send-settings)
    `((emacs . ,emacs-version)
      (lsp_mode . ,(lsp-version))
      (settings . ,settings)
      (cases . ,cases)
      (changed . ,(gethash "settings" (completer-check--info
                                       workspace (lambda (now) (equal (gethash "max_suggestions" now) 1)))))
      (sole_cases . ,(completer-check--typed)))))

(let ((report (condition-case err (completer-check--run)
                (error `((error . ,(error-message-string err)))))))
  (with-temp-file (getenv "COMPLETER_EMACS_OUT")
    (insert (json-encode report)))
  (kill-emacs 0))  ; lsp-mode's kill-emacs-hook shuts the server down

;;; emacs_lsp_mode_check.el ends here
