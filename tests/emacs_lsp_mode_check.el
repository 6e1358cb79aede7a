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

(defun completer-check--line ()
  "The text of the line at point."
  (buffer-substring-no-properties (line-beginning-position) (line-end-position)))

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

(defun completer-check--listed ()
  "The completions *Completions* shows, top to bottom; nil when it shows none."
  (when-let ((window (get-buffer-window "*Completions*")))
    (with-selected-window window
      (goto-char (point-min))
      (let (listed seen)
        (next-completion 1)
        (while (and (get-text-property (point) 'mouse-face) (not (memq (point) seen)))
          (push (point) seen)
          (push (buffer-substring-no-properties
                 (point) (next-single-property-change (point) 'mouse-face nil (point-max)))
                listed)
          (next-completion 1))
        (nreverse listed)))))

(defun completer-check--pick-first ()
  "C-x o into the *Completions* list, RET on its first line."
  (select-window (get-buffer-window "*Completions*"))
  (goto-char (point-min))
  (next-completion 1)
  (choose-completion))

(defvar completer-check--offered nil
  "The items' completion strings C-M-i last had to choose from (recorded on its way to `completion-in-region').")

(defun completer-check--record (_start _end collection &optional pred)
  "Record what COLLECTION (lsp-mode's table) offers before C-M-i acts on it."
  (setq completer-check--offered (all-completions "" collection pred)))

(advice-add 'completion-in-region :before #'completer-check--record)

(defun completer-check--type (typed)
  "TYPED on a new last line, C-M-i, and the first line listed taken; what each step left, as an alist."
  (let ((window (selected-window)) (start (goto-char (point-max))) after-capf listed)
    (unless (bolp) (insert "\n"))
    (insert typed)
    (setq completer-check--offered nil)
    (call-interactively #'completion-at-point)
    (setq after-capf (completer-check--line)
          listed (completer-check--listed))
    (when listed
      (completer-check--pick-first)
      (select-window window))
    (prog1 `((typed . ,typed) (offered . ,(vconcat (mapcar #'substring-no-properties completer-check--offered)))
             (after_capf . ,after-capf) (listed . ,(vconcat listed))
             (after_pick . ,(completer-check--line)) (lines . ,(count-lines (point-min) (point-max))))
      (when-let ((completions (get-buffer-window "*Completions*")))
        (delete-window completions))
      (delete-region start (point-max)))))

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
